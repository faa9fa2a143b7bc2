"""An evaluation stream's windows cut inside the compiled step
(graph_windows); the Evaluator's loop over them: tests/test_evaluator.py."""

import keras
import numpy as np
import pytest

from keras_rnnlm.data.graph_windows import cut_window
from keras_rnnlm.data.graph_windows import supports
from keras_rnnlm.data.graph_windows import window_chunks
from keras_rnnlm.data.sentences import SentenceResetSequence
from keras_rnnlm.data.streams import LMSequence

tf_only = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="tf ops"
)


@tf_only
@pytest.mark.parametrize(
    "n, batch, bptt, pad, windows",
    [
        (100, 4, 5, 5, 3),
        (101, 4, 5, 5, 32),
        (97, 3, 7, 9, 2),
        (40, 1, 35, 35, 1),
        (23, 2, 35, 35, 4),
    ],
)
def test_the_chunks_cut_the_sequences_batches(n, batch, bptt, pad, windows):
    """Every window cut from its chunk is the LMSequence's batch, element
    by element; every chunk has one shape; the last may hold fewer."""
    ids = np.random.default_rng(n).integers(1, 50, n).astype("int32")
    seq = LMSequence(ids, batch, bptt, pad_to=pad)
    assert supports(seq)
    chunks = list(window_chunks(seq, windows))
    assert len(chunks) == -(-len(seq) // windows)
    assert len({tuple(a.shape for a in c[:3]) for c in chunks}) == 1
    assert sum(int(c[3]) for c in chunks) == len(seq)
    import tensorflow as tf

    i = 0
    for slab, offsets, lengths, count in chunks:
        assert slab.shape[0] == batch and offsets.shape == (windows,)
        assert not lengths[count:].any()
        for k in range(int(count)):
            got = cut_window(
                tf.constant(slab),
                tf.constant(offsets[k]),
                tf.constant(lengths[k]),
                pad,
            )
            for g, e in zip(got, seq[i]):
                assert g.shape == e.shape == (batch, pad)
                assert g.dtype == e.dtype
                np.testing.assert_array_equal(g, e)
            i += 1
    assert i == len(seq)


@tf_only
def test_a_chunk_has_the_same_shape_for_every_split_length():
    shapes = set()
    for n in (30, 301, 3001):
        ids = np.arange(n, dtype="int32") % 13
        for chunk in window_chunks(LMSequence(ids, 2, 5, pad_to=5), 4):
            shapes.add(tuple(a.shape for a in chunk[:3]))
    assert len(shapes) == 1


def test_other_streams_are_not_supported():
    ids = np.arange(200, dtype="int32") % 17
    others = [
        LMSequence(ids, 2, 5),  # no padding: shapes vary
        LMSequence(ids, 2, 5, pad_to=8, variable=True, seed=0),
        LMSequence(ids, 2, 5, pad_to=5, targets_as_input=True),
        SentenceResetSequence(ids, 2, 5, ids == 0, pad_to=5),
    ]
    for seq in others:
        assert not supports(seq)
    plain = LMSequence(ids, 2, 5, pad_to=5)
    assert supports(plain) == (keras.backend.backend() == "tensorflow")
