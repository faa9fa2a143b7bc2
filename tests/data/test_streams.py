"""Tests of stream batching, BPTT windows and `LMSequence`."""

import json

import hypothesis
import keras
import numpy as np
import pytest
from hypothesis import strategies as st

from keras_rnnlm.data import LMSequence
from keras_rnnlm.data import Window
from keras_rnnlm.data import batchify
from keras_rnnlm.data import fixed_windows
from keras_rnnlm.data import variable_windows

SETTINGS = hypothesis.settings(max_examples=40, deadline=None, database=None)


def _covered_targets(windows):
    """Target positions (1-based in the stream) covered by the windows."""
    out = []
    for w in windows:
        out.extend(range(w.start + 1, w.start + w.length + 1))
    return out


def test_batchify_shape_and_contents():
    ids = np.arange(23)
    streams = batchify(ids, 4)
    assert streams.shape == (4, 5)
    assert streams.dtype == np.int32
    np.testing.assert_array_equal(streams[1], np.arange(5, 10))
    np.testing.assert_array_equal(streams.reshape(-1), np.arange(20))
    with pytest.raises(ValueError, match="too few"):
        batchify(np.arange(7), 4)
    with pytest.raises(ValueError):
        batchify(np.zeros((2, 8)), 2)


def test_fixed_windows():
    assert fixed_windows(11, 4) == [
        Window(0, 4, 1.0),
        Window(4, 4, 1.0),
        Window(8, 2, 1.0),
    ]
    assert fixed_windows(2, 70) == [Window(0, 1, 1.0)]
    with pytest.raises(ValueError):
        fixed_windows(1, 4)


@SETTINGS
@hypothesis.given(
    stream_len=st.integers(2, 300),
    bptt=st.integers(1, 40),
)
def test_fixed_windows_cover_every_target_once(stream_len, bptt):
    windows = fixed_windows(stream_len, bptt)
    assert _covered_targets(windows) == list(range(1, stream_len))
    assert all(1 <= w.length <= bptt for w in windows)


@SETTINGS
@hypothesis.given(
    stream_len=st.integers(2, 300),
    bptt=st.integers(1, 40),
    seed=st.integers(0, 2**16),
    min_len=st.integers(1, 6),
    max_len=st.one_of(st.none(), st.integers(1, 50)),
)
def test_variable_windows_cover_every_target_once(
    stream_len, bptt, seed, min_len, max_len
):
    rng = np.random.default_rng(seed)
    windows = variable_windows(
        stream_len, bptt, rng, min_len=min_len, max_len=max_len
    )
    assert _covered_targets(windows) == list(range(1, stream_len))
    for w in windows:
        assert w.length >= 1
        drawn = round(w.lr_scale * bptt)
        assert drawn >= min(min_len, max_len or min_len)
        if max_len is not None:
            assert drawn <= max_len
    # All but the last window have exactly their drawn length.
    for w in windows[:-1]:
        assert w.length == round(w.lr_scale * bptt)


def test_variable_windows_follow_awd_rule():
    rng = np.random.default_rng(0)
    windows = variable_windows(100_000, 70, rng)
    lengths = np.array([w.length for w in windows[:-1]])
    assert lengths.min() >= 5
    half = np.mean(lengths < 52)
    assert 0.02 < half < 0.09  # about 5% of windows use bptt / 2
    assert abs(np.median(lengths) - 70) <= 2
    np.testing.assert_allclose([w.lr_scale for w in windows[:-1]], lengths / 70)
    # Same draws as the rule written out by hand.
    rng = np.random.default_rng(1)
    expected = []
    for _ in range(5):
        base = 70 if rng.random() < 0.95 else 35.0
        expected.append(max(5, int(rng.normal(base, 5.0))))
    got = variable_windows(10_000, 70, np.random.default_rng(1))[:5]
    assert [w.length for w in got] == expected


def _epoch(seq):
    return [seq[i] for i in range(len(seq))]


@pytest.mark.parametrize("variable", [False, True])
def test_lm_sequence_shift_and_weights(variable):
    ids = np.arange(1000, dtype=np.int32)
    seq = LMSequence(ids, batch_size=3, bptt=7, variable=variable, seed=3)
    streams = batchify(ids, 3)
    stream_len = streams.shape[1]
    total = 0.0
    for index, (x, y, w) in enumerate(_epoch(seq)):
        start, length, _ = seq.windows[index]
        assert x.shape == y.shape == w.shape == (3, length)
        assert x.dtype == y.dtype == np.int32 and w.dtype == np.float32
        for b in range(3):
            for t in range(length):
                assert x[b, t] == streams[b, start + t]
                assert y[b, t] == streams[b, start + t + 1]
        total += w.sum()
    assert total == (stream_len - 1) * 3 == seq.num_tokens
    assert seq.num_batches == len(seq) == len(seq.windows)
    with pytest.raises(IndexError):
        seq[len(seq)]


def test_lm_sequence_pad_to():
    ids = np.arange(2 * 12)  # streams of 12 -> windows 5, 5, 1
    seq = LMSequence(ids, batch_size=2, bptt=5, pad_to=5)
    shapes = {seq[i][0].shape for i in range(len(seq))}
    assert shapes == {(2, 5)}
    x, y, w = seq[len(seq) - 1]
    np.testing.assert_array_equal(w, [[1, 0, 0, 0, 0]] * 2)
    np.testing.assert_array_equal(x[:, 0], [10, 22])
    np.testing.assert_array_equal(y[:, 0], [11, 23])
    assert (x[:, 1:] == 0).all() and (y[:, 1:] == 0).all()
    assert sum(seq[i][2].sum() for i in range(len(seq))) == seq.num_tokens
    with pytest.raises(ValueError):
        LMSequence(ids, batch_size=2, bptt=5, pad_to=4)


def test_lm_sequence_variable_pad_to_bounds_shapes():
    ids = np.arange(4 * 500)
    seq = LMSequence(ids, 4, bptt=20, variable=True, seed=0, pad_to=24)
    assert seq.max_len == 24
    assert {seq[i][0].shape for i in range(len(seq))} == {(4, 24)}
    total = sum(seq[i][2].sum() for i in range(len(seq)))
    assert total == seq.num_tokens == 4 * 499
    with pytest.raises(ValueError):
        LMSequence(ids, 4, bptt=20, variable=True, pad_to=24, max_len=30)


def test_variable_windows_reproducible_per_epoch_and_state():
    ids = np.arange(5 * 400)
    seq = LMSequence(ids, 5, bptt=10, variable=True, seed=42)
    epoch0 = seq.windows
    assert seq.lr_scale(0) == epoch0[0].lr_scale
    _epoch(seq)
    seq.on_epoch_end()
    epoch1 = seq.windows
    assert seq.epoch == 1 and epoch1 != epoch0
    state = seq.get_state()
    assert json.loads(json.dumps(state)) == {
        "epoch": 1,
        "seed": 42,
        "start": 0,
    }

    other = LMSequence(ids, 5, bptt=10, variable=True, seed=7)
    other.set_state(state)
    assert other.windows == epoch1
    other.set_epoch(0)
    assert other.windows == epoch0
    fresh = LMSequence(ids, 5, bptt=10, variable=True)
    assert isinstance(fresh.get_state()["seed"], int)


def test_fixed_lr_scale_and_epochs():
    seq = LMSequence(np.arange(100), 2, bptt=7)
    windows = seq.windows
    _epoch(seq)
    seq.on_epoch_end()
    assert seq.windows == windows and seq.epoch == 1
    assert all(seq.lr_scale(i) == 1.0 for i in range(len(seq)))


def test_pydataset_kwargs():
    seq = LMSequence(np.arange(100), 2, bptt=7)
    assert seq.workers == 1 and not seq.use_multiprocessing
    seq = LMSequence(np.arange(100), 2, bptt=7, workers=2, max_queue_size=3)
    assert seq.workers == 2 and seq.max_queue_size == 3


class _ResetMaskSequence(LMSequence):
    def extra_inputs(self, index):
        return {"reset": np.zeros((self.batch_size, 1), np.float32)}


def test_extra_inputs_extension_point():
    seq = _ResetMaskSequence(np.arange(100), 2, bptt=7)
    x, y, _ = seq[0]
    assert set(x) == {"tokens", "reset"}
    assert x["tokens"].shape == y.shape == (2, 7)
    assert LMSequence(np.arange(100), 2, bptt=7).extra_inputs(0) == {}


def test_fit_consumes_lm_sequence():
    seq = LMSequence(np.arange(200) % 11, 4, bptt=8, pad_to=8)
    model = keras.Sequential(
        [keras.Input((None,), dtype="int32"), keras.layers.Embedding(11, 4),
         keras.layers.Dense(11)]
    )  # fmt: skip
    model.compile(
        optimizer="sgd",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        run_eagerly=True,
    )
    history = model.fit(seq, epochs=2, shuffle=False, verbose=0)
    assert len(history.history["loss"]) == 2
    assert seq.epoch == 2  # Keras' extra on_epoch_end calls are ignored
    # Variable windows: one fit call per epoch.
    seq = LMSequence(np.arange(400) % 11, 4, bptt=8, variable=True, seed=1)
    for epoch in range(2):
        model.fit(seq, epochs=1, shuffle=False, verbose=0)
        assert seq.epoch == epoch + 1
    fresh = LMSequence(np.arange(400) % 11, 4, bptt=8, variable=True, seed=1)
    fresh.set_epoch(2)
    assert seq.windows == fresh.windows


def test_on_epoch_end_needs_a_served_epoch():
    seq = LMSequence(np.arange(4 * 100), 4, bptt=10, variable=True, seed=5)
    seq[0], seq[1]  # a shape peek, as `fit` does before starting
    seq.on_epoch_end()
    assert seq.epoch == 0
    seq[len(seq) - 1]
    seq.on_epoch_end()
    seq.on_epoch_end()  # a duplicate call does not skip an epoch
    assert seq.epoch == 1
    seq.set_epoch(7)
    assert seq.get_state()["epoch"] == 7


@pytest.mark.parametrize("variable", [False, True])
def test_lm_sequence_starts_an_epoch_from_a_window(variable):
    """Resuming an interrupted epoch: served from window ``start`` on, with
    the same windows, batches and lr factors as the uninterrupted epoch."""
    ids = np.arange(4 * 300)
    full = LMSequence(ids, 4, bptt=7, variable=variable, seed=3)
    full.set_epoch(2)
    part = LMSequence(ids, 4, bptt=7, variable=variable, seed=3)
    part.set_state({"epoch": 2, "seed": 3, "start": 9})
    assert part.start == 9 and len(part) == len(full) - 9
    assert part.windows == full.windows[9:]
    for i in range(len(part)):
        for a, b in zip(part[i], full[i + 9]):
            np.testing.assert_array_equal(a, b)
        assert part.lr_scale(i) == full.lr_scale(i + 9)
    part.on_epoch_end()  # the next epoch starts from its first window
    assert part.epoch == 3 and part.start == 0
    full.set_epoch(3)
    assert part.windows == full.windows
    with pytest.raises(ValueError, match="outside"):
        part.set_epoch(0, start=len(full.windows) + 5)
