import math

import keras
import numpy as np
import pytest
from keras import ops
from layer_testing import run_layer_test

from keras_rnnlm.layers import TiedEmbedding
from keras_rnnlm.layers.sampled_softmax import SampledSoftmaxDense
from keras_rnnlm.layers.sampled_softmax import UnigramSampler
from keras_rnnlm.layers.sampled_softmax import sampled_logits


def _np(x):
    return ops.convert_to_numpy(x)


def test_sampler_draws_from_add_one_unigram():
    counts = np.array([100, 50, 20, 5, 0, 0], "float32")
    sampler = UnigramSampler(6, power=1.0, seed=3)
    sampler.set_counts(counts)
    q = (counts + 1) / (counts + 1).sum()
    np.testing.assert_allclose(np.exp(_np(sampler.log_probs())), q, 1e-6)
    ids, log_expected = sampler.sample(200_000)
    ids, log_expected = _np(ids), _np(log_expected)
    assert ids.min() >= 0 and ids.max() <= 5
    freq = np.bincount(ids, minlength=6) / ids.size
    # binomial std <= sqrt(0.25 / 2e5) ~ 0.0011
    np.testing.assert_allclose(freq, q, atol=0.005)
    np.testing.assert_allclose(
        log_expected, np.log(200_000 * q[ids]), rtol=1e-5
    )


def test_sampler_power_zero_and_unset_counts_are_uniform():
    flat = UnigramSampler(4, power=0.0)
    flat.set_counts([9, 3, 0, 1])
    np.testing.assert_allclose(np.exp(_np(flat.log_probs())), 0.25, 1e-6)
    unset = UnigramSampler(4)
    np.testing.assert_allclose(np.exp(_np(unset.log_probs())), 0.25, 1e-6)


def test_sampler_rejects_bad_counts():
    sampler = UnigramSampler(3)
    with pytest.raises(ValueError, match="shape"):
        sampler.set_counts([1, 2])
    with pytest.raises(ValueError, match=">= 0"):
        sampler.set_counts([1, -2, 3])
    with pytest.raises(ValueError, match="power"):
        UnigramSampler(3, power=-1)


class _FixedSampler:
    """Always the same candidates (for a deterministic reference)."""

    def __init__(self, log_q, ids):
        self.log_q = np.asarray(log_q, "float32")
        self.ids = np.asarray(ids, "int32")

    def log_probs(self):
        return ops.convert_to_tensor(self.log_q)

    def sample(self, num, log_probs):
        assert num == self.ids.size
        return (
            ops.convert_to_tensor(self.ids),
            ops.convert_to_tensor(self.log_q[self.ids] + math.log(num)),
        )


def test_sampled_logits_match_float64_reference():
    rng = np.random.default_rng(0)
    v, d, s = 12, 5, 7
    w = rng.normal(size=(v, d))
    b = rng.normal(size=v)
    h = rng.normal(size=(2, 3, d))
    y = rng.integers(0, v, size=(2, 3))
    q = rng.random(v) + 0.1
    q /= q.sum()
    ids = np.array([0, 3, 3, 11, int(y[0, 0]), 5, 7])
    sampler = _FixedSampler(np.log(q), ids)
    out = sampled_logits(
        ops.convert_to_tensor(h.astype("float32")),
        ops.convert_to_tensor(y.astype("int32")),
        lambda i: ops.take(ops.convert_to_tensor(w.astype("float32")), i, 0),
        lambda i: ops.take(ops.convert_to_tensor(b.astype("float32")), i),
        sampler,
        s,
    )
    out = _np(out)
    assert out.shape == (2, 3, s + 1) and out.dtype == np.float32
    logit = h @ w.T + b  # (2, 3, v)
    true = np.take_along_axis(logit, y[..., None], -1)[..., 0]
    np.testing.assert_allclose(
        out[..., 0], true - np.log(s * q[y]), rtol=1e-5, atol=1e-5
    )
    # an accidental hit (candidate 4 is the first target) is kept
    np.testing.assert_allclose(
        out[..., 1:],
        logit[..., ids] - np.log(s * q[ids]),
        rtol=1e-5,
        atol=1e-5,
    )


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="uses tf.GradientTape"
)
def test_loss_and_gradient_tend_to_the_full_softmax():
    """With many draws, loss - log(S Q(y)) -> the full NLL (plus the
    target column's O(1/S) term) and the gradient -> the full-softmax
    gradient (the importance-sampling estimate)."""
    import tensorflow as tf

    from keras_rnnlm.metrics import token_nll

    rng = np.random.default_rng(1)
    v, d, n, s = 40, 6, 16, 1_000_000
    w = tf.constant(rng.normal(size=(v, d)).astype("float32"))
    b = tf.constant(rng.normal(size=v).astype("float32"))
    h = tf.Variable(rng.normal(size=(n, d)).astype("float32"))
    y = tf.constant(rng.integers(0, v, size=n).astype("int32"))
    sampler = UnigramSampler(v, seed=0)
    sampler.set_counts(rng.integers(0, 1000, size=v))
    with tf.GradientTape() as tape:
        full = token_nll(y, tf.matmul(h, w, transpose_b=True) + b)
        full_loss = tf.reduce_sum(full)
    g_full = tape.gradient(full_loss, h).numpy()
    with tf.GradientTape() as tape:
        logits = sampled_logits(
            h,
            y,
            lambda i: tf.gather(w, i),
            lambda i: tf.gather(b, i),
            sampler,
            s,
        )
        sampled = token_nll(tf.zeros_like(y), logits)
        sampled_loss = tf.reduce_sum(sampled)
    g_sampled = tape.gradient(sampled_loss, h).numpy()
    log_sq = np.log(s) + _np(sampler.log_probs())[y.numpy()]
    # the target's own column adds log(1 + p_y / (S Q(y))) to the full NLL
    p_y = np.exp(-full.numpy())
    expect = full.numpy() + np.log1p(p_y / np.exp(log_sq))
    np.testing.assert_allclose(sampled.numpy() - log_sq, expect, atol=0.02)
    cos = (g_full * g_sampled).sum() / (
        np.linalg.norm(g_full) * np.linalg.norm(g_sampled)
    )
    assert cos > 0.999, cos
    # and with few draws it is a different (noisy) function
    small = token_nll(
        tf.zeros_like(y),
        sampled_logits(
            h,
            y,
            lambda i: tf.gather(w, i),
            lambda i: tf.gather(b, i),
            sampler,
            4,
        ),
    )
    assert not np.allclose(small.numpy(), full.numpy(), atol=0.03)


def test_dense_is_plain_dense_unless_training_with_targets(tmp_path):
    rng = np.random.default_rng(2)
    layer = SampledSoftmaxDense(30, num_sampled=6, seed=1)
    h = rng.normal(size=(2, 4, 5)).astype("float32")
    y = rng.integers(0, 30, size=(2, 4)).astype("int32")
    full = _np(layer(h))
    expect = h @ _np(layer.kernel) + _np(layer.bias)
    np.testing.assert_allclose(full, expect, atol=1e-5)
    np.testing.assert_allclose(_np(layer(h, targets=y)), full, atol=1e-6)
    np.testing.assert_allclose(
        _np(layer(h, targets=y, training=False)), full, atol=1e-6
    )
    sampled = _np(layer(h, targets=y, training=True))
    assert sampled.shape == (2, 4, 7)
    # column 0: the target's logit minus log(S Q(y)), Q uniform here
    np.testing.assert_allclose(
        sampled[..., 0],
        np.take_along_axis(full, y[..., None], -1)[..., 0] - np.log(6 / 30),
        atol=1e-4,
    )


def test_dense_layer_checks():
    """Without targets: the full logits, in training too; the sampler's
    counts are a saved non-trainable weight."""
    run_layer_test(
        SampledSoftmaxDense,
        dict(units=30, num_sampled=6, seed=1),
        input_shape=(2, 4, 5),
        expected_output_shape=(None, 4, 30),
        expected_num_trainable_weights=2,
        expected_num_non_trainable_weights=1,
        expected_num_seed_generators=1,
    )


def test_sampler_layer_checks():
    """No call: constructor, config and registration, built at once."""
    run_layer_test(
        UnigramSampler,
        dict(vocab_size=7, power=0.75, seed=2),
        expected_num_trainable_weights=0,
        expected_num_non_trainable_weights=1,
        expected_num_seed_generators=1,
    )


def test_tied_embedding_sampled_mode_shares_the_matrix():
    rng = np.random.default_rng(3)
    emb = TiedEmbedding(20, 4, num_sampled=5, sampler_seed=0)
    emb(np.array([[1, 2]]))
    emb.output_bias.assign(rng.normal(size=20).astype("float32"))
    h = rng.normal(size=(3, 4)).astype("float32")
    y = np.array([1, 7, 19], "int32")
    full = _np(emb(h, reverse=True))
    sampled = _np(emb(h, reverse=True, targets=y, training=True))
    assert sampled.shape == (3, 6)
    np.testing.assert_allclose(
        sampled[:, 0], full[np.arange(3), y] - np.log(5 / 20), atol=1e-4
    )
    # without sampling configured the targets are ignored
    plain = TiedEmbedding(20, 4)
    plain(np.array([[1]]))
    assert _np(plain(h, reverse=True, targets=y, training=True)).shape == (
        3,
        20,
    )
    run_layer_test(
        TiedEmbedding,
        dict(input_dim=20, output_dim=4, num_sampled=5, sampler_seed=0),
        np.array([[1, 2], [19, 0]], "int32"),
        expected_output_shape=(None, 2, 4),
        expected_num_trainable_weights=2,
        expected_num_non_trainable_weights=1,
        expected_num_seed_generators=1,
    )
