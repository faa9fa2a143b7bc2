import keras
import numpy as np
from keras import ops
from layer_testing import run_layer_test

from keras_rnnlm.layers.mixture_of_softmaxes import MixtureLogProbs
from keras_rnnlm.layers.mixture_of_softmaxes import MixtureOfSoftmaxes
from keras_rnnlm.layers.mixture_of_softmaxes import mixture_log_probs
from keras_rnnlm.layers.tied_embedding import TiedEmbedding


def _np_softmax(z):
    z = z - z.max(-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


def test_mixture_in_probability_space_matches_numpy():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 3, 4, 11)) * 5
    prior = rng.normal(size=(2, 3, 4))
    expect = np.log(
        (_np_softmax(prior)[..., None] * _np_softmax(logits)).sum(-2)
    )
    got = ops.convert_to_numpy(
        mixture_log_probs(logits.astype("float32"), prior.astype("float32"))
    )
    np.testing.assert_allclose(got, expect, atol=1e-5)
    np.testing.assert_allclose(np.exp(got).sum(-1), 1.0, atol=1e-5)


def test_head_probabilities_sum_to_one():
    emb = TiedEmbedding(17, 4)
    tokens = keras.Input((None,), dtype="int32")
    h = keras.layers.Dense(6)(emb(tokens))
    latent, prior = MixtureOfSoftmaxes(3, 4, latent_dropout=0.3, seed=1)(h)
    out = MixtureLogProbs()([emb(latent, reverse=True), prior])
    model = keras.Model(tokens, out)
    x = np.random.default_rng(0).integers(0, 17, (2, 5))
    for training in (False, True):
        p = np.exp(ops.convert_to_numpy(model(x, training=training)))
        assert p.shape == (2, 5, 17)
        np.testing.assert_allclose(p.sum(-1), 1.0, atol=1e-5)
    # latent (6*12+12) + prior (6*3) + dense (4*6+6) + emb (17*4+17)
    assert model.count_params() == 84 + 18 + 30 + 85


def test_mixture_of_softmaxes_layer_checks():
    run_layer_test(
        MixtureOfSoftmaxes,
        dict(num_components=3, latent_dim=4, latent_dropout=0.3, seed=1),
        input_shape=(2, 5, 6),
        expected_output_shape=[(None, 5, 3, 4), (None, 5, 3)],
        expected_num_trainable_weights=3,
        expected_num_seed_generators=1,
        training_changes_output=True,
    )


def test_mixture_log_probs_layer_checks():
    run_layer_test(
        MixtureLogProbs,
        {},
        input_shape=[(2, 5, 3, 7), (2, 5, 3)],
        expected_output_shape=(None, 5, 7),
        expected_num_trainable_weights=0,
    )


def test_head_against_numpy_and_locked_latent_dropout():
    """Distinct random weights: latent_k = tanh(h W + b) split into K
    experts, prior logits h W_pi (no bias), decoded by the tied embedding
    E^T + b_out and mixed in probability space (Yang et al. Eq. 2); in
    training the latent is the inference latent under one locked mask
    (0 or 1 / (1 - p), constant over time)."""
    rng = np.random.default_rng(5)
    k, e, v, p = 3, 4, 9, 0.4
    h = rng.normal(size=(2, 6, 5)).astype("float32")
    mos = MixtureOfSoftmaxes(k, e, latent_dropout=p, seed=2)
    emb = TiedEmbedding(v, e)
    mos.build(h.shape)
    emb.build()
    for w in [*mos.weights, *emb.weights]:
        w.assign(rng.normal(size=w.shape).astype("float32"))
    w_lat, b_lat = mos.latent_kernel.numpy(), mos.latent_bias.numpy()
    w_pi = mos.prior_kernel.numpy()
    table, b_out = emb.embeddings.numpy(), emb.output_bias.numpy()
    expect_latent = np.tanh(h @ w_lat + b_lat).reshape(2, 6, k, e)
    expect_prior = h @ w_pi
    pi = _np_softmax(expect_prior.astype("float64"))
    experts = _np_softmax(expect_latent.astype("float64") @ table.T + b_out)
    expect_logp = np.log((pi[..., None] * experts).sum(-2))

    latent, prior = mos(h)
    np.testing.assert_allclose(latent, expect_latent, atol=1e-5)
    np.testing.assert_allclose(prior, expect_prior, atol=1e-4)
    logp = MixtureLogProbs()([emb(latent, reverse=True), prior])
    np.testing.assert_allclose(logp, expect_logp, atol=1e-4)

    latent, prior = mos(h, training=True)
    np.testing.assert_allclose(prior, expect_prior, atol=1e-4)
    latent = ops.convert_to_numpy(latent)
    kept = (latent != 0).reshape(2, 6, k * e)
    assert 0 < kept.mean() < 1
    np.testing.assert_array_equal(kept, kept[:, :1].repeat(6, 1))
    mask = kept.reshape(latent.shape) / (1 - p)
    np.testing.assert_allclose(latent, expect_latent * mask, atol=1e-5)
