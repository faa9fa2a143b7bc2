"""An evaluation stream's windows cut by tf.data (graph_windows)."""

import keras
import numpy as np
import pytest

from keras_rnnlm.data.graph_windows import graph_windows
from keras_rnnlm.data.graph_windows import supports
from keras_rnnlm.data.sentences import SentenceResetSequence
from keras_rnnlm.data.streams import LMSequence

tf_only = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="a tf.data pipeline"
)


@tf_only
@pytest.mark.parametrize(
    "n, batch, bptt",
    [(100, 4, 5), (101, 4, 5), (97, 3, 7), (40, 1, 35), (23, 2, 35)],
)
def test_the_same_batches_as_the_sequence(n, batch, bptt):
    ids = np.random.default_rng(n).integers(1, 50, n).astype("int32")
    seq = LMSequence(ids, batch, bptt, pad_to=bptt)
    data = graph_windows(seq)
    assert data is not seq
    got = list(data.as_numpy_iterator())
    assert len(got) == len(seq)
    for i, (x, y, w) in enumerate(got):
        ex, ey, ew = seq[i]
        assert x.shape == ex.shape == (batch, bptt) and x.dtype == ex.dtype
        np.testing.assert_array_equal(x, ex)
        np.testing.assert_array_equal(y, ey)
        np.testing.assert_array_equal(w, ew)
    assert data.element_spec[0].shape == (batch, bptt)  # static: one trace


def test_other_streams_are_served_as_they_are():
    ids = np.arange(200, dtype="int32") % 17
    others = [
        LMSequence(ids, 2, 5),  # no padding: shapes vary
        LMSequence(ids, 2, 5, pad_to=8, variable=True, seed=0),
        LMSequence(ids, 2, 5, pad_to=5, targets_as_input=True),
        SentenceResetSequence(ids, 2, 5, ids == 0, pad_to=5),
    ]
    for seq in others:
        assert not supports(seq)
        assert graph_windows(seq) is seq
    plain = LMSequence(ids, 2, 5, pad_to=5)
    assert supports(plain) == (keras.backend.backend() == "tensorflow")


@tf_only
def test_a_stateful_model_evaluates_the_same():
    from keras_rnnlm.config import ModelConfig
    from keras_rnnlm.metrics import TokenCrossEntropy
    from keras_rnnlm.metrics import lm_metrics
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.models.state import reset_states

    cfg = ModelConfig(embedding_dim=6, hidden_sizes=[6], init_range=0.5)
    model = build_language_model(cfg, 17, 3, seed=1)
    model.compile(loss=TokenCrossEntropy(), weighted_metrics=lm_metrics(False))
    ids = np.random.default_rng(2).integers(0, 17, 301).astype("int32")
    seq = LMSequence(ids, 3, 7, pad_to=7)
    results = []
    for data in (seq, graph_windows(seq)):
        reset_states(model)
        results.append(model.evaluate(data, verbose=0, return_dict=True))
    assert results[0]["nll"] == pytest.approx(results[1]["nll"], rel=1e-6)
