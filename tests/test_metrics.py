import math

import keras
import numpy as np
import pytest
from graphs_ran import training_step_nodes
from keras import ops

from keras_rnnlm.config import ModelConfig
from keras_rnnlm.evaluation import Evaluator
from keras_rnnlm.metrics import BitsPerCharacter
from keras_rnnlm.metrics import Perplexity
from keras_rnnlm.metrics import TokenCrossEntropy
from keras_rnnlm.metrics import TokenNLL
from keras_rnnlm.metrics import token_nll


def _log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def test_token_weighted_not_batch_averaged():
    rng = np.random.default_rng(0)
    logits = [rng.normal(size=(2, 5, 7)), rng.normal(size=(2, 3, 7))]
    labels = [rng.integers(0, 7, (2, 5)), rng.integers(0, 7, (2, 3))]
    weights = [np.ones((2, 5)), np.array([[1, 1, 0], [1, 0, 0]], float)]
    nll, ppl, bpc = TokenNLL(), Perplexity(), BitsPerCharacter()
    total = count = 0.0
    for z, y, w in zip(logits, labels, weights):
        for m in (nll, ppl, bpc):
            m.update_state(y, z.astype("float32"), sample_weight=w)
        lp = _log_softmax(z)
        tok = -np.take_along_axis(lp, y[..., None], -1)[..., 0]
        total += (tok * w).sum()
        count += w.sum()
    expect = total / count
    assert math.isclose(float(nll.result()), expect, rel_tol=1e-6)
    assert math.isclose(float(ppl.result()), math.exp(expect), rel_tol=1e-5)
    assert math.isclose(float(bpc.result()), expect / math.log(2), rel_tol=1e-6)
    nll.reset_state()
    assert float(nll.result()) == 0.0


@pytest.mark.slow
def test_evaluation_independent_of_batch_size_and_bptt():
    """Streaming evaluation (windows, carried state, padded last window)
    must equal one stateless pass over each whole stream, token-weighted,
    for any batch size and window; for batch 1 the figure must not depend
    on the window at all."""
    cfg = ModelConfig(embedding_dim=6, hidden_sizes=[6], init_range=0.5)
    ids = np.random.default_rng(0).integers(0, 20, 121).astype("int32")
    results = []
    # streams of 120 targets: batch 1 -> 120, batch 4 -> 4 x 29 ...
    # Every configuration scores a different subset unless batch == 1, so
    # compare batch 1 with several windows, and batch 4 / 8 with windows,
    # each against the NumPy reference over its own scored positions.
    for batch, bptt in ((1, 7), (1, 120), (1, 13), (4, 5), (4, 29), (8, 3)):
        ev = Evaluator(cfg, 20, batch, bptt)
        if not results:
            ref_model = ev.model
            ref_weights = [
                w.numpy() if hasattr(w, "numpy") else w
                for w in ref_model.get_weights()
            ]
        else:
            ev.model.set_weights(
                [w for w in ref_weights]
                if len(ref_weights) == len(ev.model.get_weights())
                and all(
                    a.shape == b.shape
                    for a, b in zip(ref_weights, ev.model.get_weights())
                )
                else _copy_trainable(ref_model, ev.model)
            )
        r = ev.evaluate(ids)
        # reference: per-token NLL from a batch-1 stateless forward pass
        length = (len(ids) // batch) * batch
        streams = ids[:length].reshape(batch, -1)
        logits = ops.convert_to_numpy(
            _stateless(ref_model, cfg)(streams[:, :-1])
        )
        lp = _log_softmax(logits.astype("float64"))
        tok = -np.take_along_axis(lp, streams[:, 1:, None], -1)[..., 0]
        assert r["tokens"] == tok.size
        assert math.isclose(r["nll"], tok.mean(), rel_tol=1e-5), (batch, bptt)
        results.append((batch, r["nll"]))
    batch1 = [nll for b, nll in results if b == 1]
    assert max(batch1) - min(batch1) < 1e-5


def _copy_trainable(src, dst):
    from keras_rnnlm.models import copy_weights

    copy_weights(src, dst)
    return dst.get_weights()


_cache = {}


def _stateless(model, cfg):
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.models import copy_weights

    m = build_language_model(cfg, 20, None, stateful=False)
    copy_weights(model, m)
    return m


def test_perplexity_metric_serializable():
    m = Perplexity()
    clone = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(m)
    )
    assert isinstance(clone, Perplexity)


def test_token_nll_equals_keras_cross_entropy():
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(3, 5, 11)).astype("float32") * 4
    y = rng.integers(0, 11, (3, 5))
    expect = keras.losses.sparse_categorical_crossentropy(
        y, logits, from_logits=True
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(token_nll(y, logits)),
        ops.convert_to_numpy(expect),
        rtol=1e-5,
        atol=1e-5,
    )
    probs = ops.softmax(logits)
    np.testing.assert_allclose(
        ops.convert_to_numpy(token_nll(y, probs, from_logits=False)),
        ops.convert_to_numpy(expect),
        rtol=1e-4,
        atol=1e-5,
    )
    # The loss reduces like SparseCategoricalCrossentropy, weights included.
    w = (rng.random((3, 5)) > 0.3).astype("float32")
    ours = TokenCrossEntropy()(y, logits, sample_weight=w)
    ref = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(
        y, logits, sample_weight=w
    )
    np.testing.assert_allclose(float(ours), float(ref), rtol=1e-5)
    again = TokenCrossEntropy.from_config(TokenCrossEntropy().get_config())
    assert again.from_logits


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_token_nll_gradient_is_softmax_minus_onehot(dtype):
    """The fused TensorFlow kernel's hand-written gradient (and JAX's
    autodiff) against the closed form, with weights and float targets (as
    Keras hands them to a loss)."""
    rng = np.random.default_rng(4)
    logits = rng.normal(size=(2, 3, 7)).astype("float32") * 3
    y = rng.integers(0, 7, (2, 3))
    w = rng.random((2, 3)).astype("float32")
    x = ops.convert_to_tensor(logits, dtype)
    y_float = ops.convert_to_tensor(y, "float32")

    def loss_fn(z):
        return ops.sum(token_nll(y_float, z) * w)

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = loss_fn(x)
        grad = tape.gradient(loss, x)
    elif keras.backend.backend() == "jax":
        import jax

        loss, grad = jax.value_and_grad(loss_fn)(x)
    else:
        pytest.skip("gradient check written for TensorFlow and JAX")
    z = ops.convert_to_numpy(ops.cast(x, "float32")).astype("float64")
    p = np.exp(z - z.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    expect = (p - np.eye(7)[y]) * w[..., None]
    tol = 1e-5 if dtype == "float32" else 1e-2
    np.testing.assert_allclose(
        ops.convert_to_numpy(ops.cast(grad, "float32")), expect, atol=tol
    )
    nll = -np.log(np.take_along_axis(p, y[..., None], -1))[..., 0]
    np.testing.assert_allclose(float(loss), (nll * w).sum(), rtol=1e-5)


def test_token_nll_exact_where_the_probability_underflows():
    """A target whose float32 probability underflows (``-log p`` of 0
    would be ``inf``) still gets ``logsumexp - logit``, beside ordinary
    rows of the same batch."""
    logits = np.zeros((2, 3, 5), "float32")
    logits[0, 0, 4] = 200.0
    logits[1, 2, 1] = 3.0
    y = np.zeros((2, 3), "int64")
    got = ops.convert_to_numpy(token_nll(y, logits))
    z = logits.astype("float64")
    lse = np.log(np.exp(z - z.max(-1, keepdims=True)).sum(-1)) + z.max(-1)
    np.testing.assert_allclose(got, lse - z[..., 0], rtol=1e-6)
    assert got[0, 0] == pytest.approx(200.0)


@pytest.mark.parametrize("cell", ["gru", "simple_rnn", "keras_lstm"])
def test_batch_one_evaluation_of_keras_layers(cell):
    """Keras's own recurrent layers evaluate at batch 1 (AWD's test batch)
    and stream exactly: windows of 5 == one window over the split."""
    cfg = ModelConfig(embedding_dim=6, hidden_sizes=[6], cell=cell)
    ids = np.random.default_rng(0).integers(0, 20, 101).astype("int32")
    short = Evaluator(cfg, 20, 1, 5)
    whole = Evaluator(cfg, 20, 1, 100)
    whole.model.set_weights(short.model.get_weights())
    a, b = short.evaluate(ids), whole.evaluate(ids)
    assert a["tokens"] == b["tokens"] == 100
    assert a["nll"] == pytest.approx(b["nll"], rel=1e-5)


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="TensorFlow's fused NLL kernel and graph optimizer",
)
def test_training_step_runs_the_nll_forward_once():
    """The loss and the NLL metric of one training step share one pass of
    the fused NLL forward over the logits (the graph optimizer merges
    their two calls): the metric costs no second pass over the
    (tokens x vocabulary) logits. Counted in the graphs TensorFlow ran,
    after its optimizations: one softmax over the logits, and no
    exponential in the backward (it reads the forward's
    probabilities)."""
    nodes = training_step_nodes()  # 2 x 3 tokens: (6, 50) logits
    softmaxes = [n.name for n in nodes if n.op.endswith("Softmax")]
    assert len(softmaxes) == 1, softmaxes
    import tensorflow as tf

    from keras_rnnlm.metrics import _nll_kernels

    backward = _nll_kernels()[1].get_concrete_function(
        tf.TensorSpec((None, 50), tf.float32),
        tf.TensorSpec((None,), tf.int32),
        tf.TensorSpec((None,), tf.float32),
    )
    assert "Exp" not in {op.type for op in backward.graph.get_operations()}
