"""CBOWContext against an independent float64 NumPy implementation of
Eq. (1) of *On the long-term learning ability of LSTM LMs*
(arXiv:2106.08927)."""

import keras
import numpy as np
import pytest
from keras import ops
from layer_testing import run_layer_test

from keras_rnnlm.layers.cbow_context import WEIGHTINGS
from keras_rnnlm.layers.cbow_context import CBOWContext
from keras_rnnlm.layers.cbow_context import window_sums

V, D = 13, 4


def numpy_cbow(ids, table, weighting, window, alpha=1.05, idf=None):
    """d_t by the definition: for each stream and step, the weighted mean
    of the embeddings of the (at most) ``window + 1`` most recent words of
    the whole stream, ``w_t`` included, in float64."""
    table = np.asarray(table, np.float64)
    out = np.zeros((*ids.shape, table.shape[1]))
    for b in range(ids.shape[0]):
        for t in range(ids.shape[1]):
            num = np.zeros(table.shape[1])
            den = 0.0
            for k in range(min(window, t) + 1):
                w = ids[b, t - k]
                if weighting == "uniform":
                    g = 1.0
                elif weighting == "positional":
                    g = alpha ** (-k)
                else:
                    g = float(idf[w])
                num += g * table[w]
                den += g
            out[b, t] = num / den if den > 0 else 0.0
    return out


def _layer(weighting, window, batch, stateful=True, seed=0, **kw):
    layer = CBOWContext(
        V, D, weighting=weighting, window=window, stateful=stateful, **kw
    )
    layer.build((batch, None))
    rng = np.random.default_rng(seed)
    layer.embeddings.assign(rng.uniform(-1, 1, (V, D)).astype("float32"))
    idf = None
    if weighting == "idf":
        idf = rng.uniform(0.0, 3.0, V).astype("float32")
        idf[3] = 0.0  # a word in every document
        layer.set_idf(idf)
    return layer, idf


@pytest.mark.parametrize("weighting", WEIGHTINGS)
@pytest.mark.parametrize("window", [1, 5, 100])
def test_matches_numpy_across_batch_boundaries(weighting, window):
    batch, length, bptt = 3, 230, 17
    ids = np.random.default_rng(1).integers(0, V, (batch, length))
    layer, idf = _layer(weighting, window, batch)
    want = numpy_cbow(ids, layer.embeddings.numpy(), weighting, window, idf=idf)
    got = [
        ops.convert_to_numpy(layer(ids[:, s : s + bptt].astype("int32")))
        for s in range(0, length, bptt)
    ]
    np.testing.assert_allclose(np.concatenate(got, 1), want, atol=2e-6)
    # reset empties the window: the first batch again
    layer.reset_state()
    np.testing.assert_allclose(
        ops.convert_to_numpy(layer(ids[:, :bptt].astype("int32"))),
        want[:, :bptt],
        atol=2e-6,
    )


def test_all_zero_idf_window_is_zero():
    layer, _ = _layer("idf", 2, 1)
    layer.set_idf(np.zeros(V, "float32"))
    d = ops.convert_to_numpy(layer(np.array([[1, 2, 3]], "int32")))
    assert np.all(d == 0.0)


def test_return_state_and_initial_state_continue_a_stream():
    """The stateless twin (scoring, export) carries the ids explicitly."""
    ids = np.random.default_rng(2).integers(0, V, (2, 40)).astype("int32")
    ref, _ = _layer("positional", 10, 2)
    want = ops.convert_to_numpy(ref(ids))
    twin, _ = _layer("positional", 10, 2, stateful=False, return_state=True)
    d1, state = twin(ids[:, :25])
    assert tuple(state.shape) == (2, 10)
    d2, _ = twin(ids[:, 25:], initial_state=[state])
    got = np.concatenate([ops.convert_to_numpy(d) for d in (d1, d2)], 1)
    np.testing.assert_allclose(got, want, atol=1e-6)
    init = ops.convert_to_numpy(twin.get_initial_state(2)[0])
    assert init.shape == (2, 10) and np.all(init == -1.0)


def test_long_stream_error_does_not_grow():
    """No float32 sum is carried across calls: the error at the end of a
    long stream is that of its start."""
    batch, bptt, calls = 1, 35, 600  # 21000 tokens
    rng = np.random.default_rng(3)
    ids = rng.integers(0, V, (batch, bptt * calls))
    layer, _ = _layer("uniform", 100, batch)
    last = None
    for s in range(0, ids.shape[1], bptt):
        last = ops.convert_to_numpy(layer(ids[:, s : s + bptt].astype("int32")))
    tail = ids[:, -(bptt + 100) :]
    want = numpy_cbow(tail, layer.embeddings.numpy(), "uniform", 100)
    np.testing.assert_allclose(last, want[:, -bptt:], atol=2e-6)


@pytest.mark.parametrize(
    "width,time",
    [(w, 30) for w in (1, 2, 3, 7, 8, 30)] + [(101, 131), (101, 250), (8, 250)],
)
def test_window_sums(width, time):
    """Every full window, short and long inputs (one band matrix, or
    blocks of ``width`` outputs)."""
    x = np.random.default_rng(4).normal(size=(2, time, 3)).astype("float32")
    got = ops.convert_to_numpy(window_sums(x, width, 0.9))
    want = np.zeros((2, time - width + 1, 3))
    for i in range(time - width + 1):
        for k in range(width):
            want[:, i] += 0.9**k * x[:, i + width - 1 - k]
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_gradients_reach_history_embeddings():
    """The carried words' embeddings get gradients from later steps."""
    layer, _ = _layer("uniform", 4, 1, stateful=False, return_state=True)
    hist = np.array([[1.0, 2.0, -1.0, 5.0]], "float32")

    if keras.backend.backend() != "tensorflow":
        pytest.skip("tape check on TensorFlow only")
    import tensorflow as tf

    with tf.GradientTape() as tape:
        d, _ = layer(np.array([[7]], "int32"), initial_state=[hist])
        total = tf.reduce_sum(d)
    (g,) = tape.gradient(total, [layer.embeddings.value])
    g = ops.convert_to_numpy(tf.convert_to_tensor(g))
    rows = {i for i in range(V) if np.any(g[i] != 0)}
    assert rows == {1, 2, 5, 7}
    np.testing.assert_allclose(g[[1, 2, 5, 7]], 0.25)


@pytest.mark.parametrize(
    "weighting,stateful", [(w, s) for w in WEIGHTINGS for s in (False, True)]
)
def test_run_layer_test(weighting, stateful):
    idf = weighting == "idf"
    run_layer_test(
        CBOWContext,
        {
            "vocab_size": V,
            "output_dim": D,
            "weighting": weighting,
            "window": 6,
            "stateful": stateful,
        },
        np.random.default_rng(5).integers(0, V, (2, 9)).astype("int32"),
        expected_output_shape=(None, 9, D),
        expected_num_trainable_weights=1,
        expected_num_non_trainable_weights=int(idf),
        expected_num_non_trainable_variables=int(idf) + int(stateful),
    )


def test_run_layer_test_return_state():
    run_layer_test(
        CBOWContext,
        {"vocab_size": V, "output_dim": D, "window": 3, "return_state": True},
        np.random.default_rng(6).integers(0, V, (2, 5)).astype("int32"),
        expected_output_shape=[(None, 5, D), (None, 3)],
        expected_num_trainable_weights=1,
        expected_num_non_trainable_variables=0,
    )


def test_invalid_arguments():
    with pytest.raises(ValueError, match="weighting"):
        CBOWContext(V, D, weighting="tfidf")
    with pytest.raises(ValueError, match="window"):
        CBOWContext(V, D, window=0)
    with pytest.raises(ValueError, match="set_idf"):
        _layer("uniform", 3, 1)[0].set_idf(np.ones(V))
