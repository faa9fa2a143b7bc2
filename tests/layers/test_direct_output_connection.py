import keras
import numpy as np
from keras import ops
from layer_testing import run_layer_test

from keras_rnnlm.layers.direct_output_connection import DirectOutputConnection
from keras_rnnlm.layers.direct_output_connection import (
    coefficient_of_variation_squared,
)
from keras_rnnlm.layers.mixture_of_softmaxes import MixtureLogProbs
from keras_rnnlm.layers.tied_embedding import TiedEmbedding


def test_cv_penalty_on_fixed_tensor_as_reference_code():
    # prior (batch=2, time=2, J=3)
    prior = np.array(
        [
            [[0.5, 0.3, 0.2], [0.1, 0.6, 0.3]],
            [[0.2, 0.2, 0.6], [0.3, 0.3, 0.4]],
        ],
        "float32",
    )
    # B summed over time: [[0.6, 0.9, 0.5], [0.5, 0.5, 1.0]]
    # mean = 4.0 / 6 = 2/3; squared deviations: 1/225, 49/900, 3 * 1/36,
    # 1/9 -> sum 0.253333; unbiased variance over the 6 entries = 0.050667
    # cv^2 = var * (J - 1) / mean^2 = 0.050667 * 2 / (4 / 9) = 0.228
    got = float(coefficient_of_variation_squared(prior))
    assert np.isclose(got, 0.228, rtol=1e-5)
    # (The textbook Eq. 13 on B summed over the whole batch, [1.1, 1.4,
    # 1.5], gives (std / mean)^2 = 0.0163 instead.)


def _np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_latents_prior_and_cv_loss_against_numpy():
    """Distinct random weights: the latents are tanh(h_n W_n + b_n) of the
    sources with i_n > 0, in source order, split into i_n components; the
    prior logits are h_last W_pi (no bias); the training loss is
    lambda * cv^2 of softmax(prior) by the hand formula of the first
    test; the training latents are the inference ones under one locked
    mask (0 or 1 / (1 - p), constant over time)."""
    rng = np.random.default_rng(3)
    comps, e, p = [2, 0, 3], 4, 0.5
    srcs = [rng.normal(size=(2, 5, d)).astype("float32") for d in (3, 6, 7)]
    doc = DirectOutputConnection(
        comps, e, latent_dropout=p, cv_penalty=0.3, seed=1
    )
    doc.build([x.shape for x in srcs])
    for w in doc.trainable_weights:
        w.assign(rng.normal(size=w.shape).astype("float32"))
    weights = {w.path.split("/")[-1]: w.numpy() for w in doc.weights}
    parts = [
        np.tanh(x @ weights[f"kernel_{n}"] + weights[f"bias_{n}"])
        for n, x in enumerate(srcs)
        if comps[n]
    ]
    expect_latent = np.concatenate(parts, -1).reshape(2, 5, 5, e)
    expect_prior = srcs[-1] @ weights["prior_kernel"]
    latent, prior = doc(srcs)
    np.testing.assert_allclose(latent, expect_latent, atol=1e-5)
    np.testing.assert_allclose(prior, expect_prior, atol=1e-4)
    assert not doc.losses

    latent, prior = doc(srcs, training=True)
    np.testing.assert_allclose(prior, expect_prior, atol=1e-4)
    b = _np_softmax(expect_prior.astype("float64")).sum(1).reshape(-1)
    j = sum(comps)
    cv2 = b.var(ddof=1) * (j - 1) / b.mean() ** 2
    assert len(doc.losses) == 1
    np.testing.assert_allclose(float(doc.losses[0]), 0.3 * cv2, rtol=1e-4)
    latent = ops.convert_to_numpy(latent)
    kept = (latent != 0).reshape(2, 5, j * e)  # one mask over J * E
    assert 0 < kept.mean() < 1
    np.testing.assert_array_equal(kept, kept[:, :1].repeat(5, 1))
    mask = kept.reshape(latent.shape) / (1 - p)
    np.testing.assert_allclose(latent, expect_latent * mask, atol=1e-5)


def _model(components=(1, 0, 2), cv_penalty=0.01):
    emb = TiedEmbedding(13, 4)
    tokens = keras.Input((None,), dtype="int32")
    h0 = emb(tokens)
    h1 = keras.layers.Dense(6)(h0)
    h2 = keras.layers.Dense(5)(h1)
    doc = DirectOutputConnection(
        list(components), 4, latent_dropout=0.6, cv_penalty=cv_penalty, seed=0
    )
    latent, prior = doc([h0, h1, h2])
    out = MixtureLogProbs()([emb(latent, reverse=True), prior])
    return keras.Model(tokens, out), doc


def test_probabilities_sum_to_one_and_cv_loss_in_training_only():
    model, doc = _model()
    x = np.random.default_rng(0).integers(0, 13, (3, 6))
    p = np.exp(ops.convert_to_numpy(model(x)))
    np.testing.assert_allclose(p.sum(-1), 1.0, atol=1e-5)
    assert not model.losses
    p = np.exp(ops.convert_to_numpy(model(x, training=True)))
    np.testing.assert_allclose(p.sum(-1), 1.0, atol=1e-5)
    assert len(model.losses) == 1
    assert np.isclose(float(model.losses[0]), 0.01 * float(doc.cv) ** 2)
    # sources with i_n = 0 have no projection; prior from the last source
    names = sorted(w.path.split("/")[-1] for w in doc.trainable_weights)
    assert names == ["bias_0", "bias_2", "kernel_0", "kernel_2", "prior_kernel"]
    assert tuple(doc.prior_kernel.shape) == (5, 3)


def test_one_dropout_mask_shared_over_all_components():
    doc = DirectOutputConnection([2, 1], 3, latent_dropout=0.5, seed=0)
    srcs = [np.ones((2, 4, 5), "float32"), np.ones((2, 4, 6), "float32")]
    doc.build([s.shape for s in srcs])
    for w in doc.trainable_weights:
        w.assign(np.ones(w.shape) * 0.1)
    latent, _ = doc(srcs, training=True)
    latent = ops.convert_to_numpy(latent)
    assert latent.shape == (2, 4, 3, 3)
    # locked: the same pattern at every time step
    np.testing.assert_array_equal(
        latent == 0, (latent[:, :1] == 0).repeat(4, 1)
    )


def test_layer_checks():
    """Three sources, the middle one without components: two projections
    and the prior; the CV penalty is the one training loss and ``cv`` a
    non-trainable weight."""
    run_layer_test(
        DirectOutputConnection,
        dict(
            components=[2, 0, 1],
            latent_dim=4,
            latent_dropout=0.5,
            cv_penalty=0.1,
            seed=0,
        ),
        input_shape=[(2, 3, 5), (2, 3, 6), (2, 3, 7)],
        expected_output_shape=[(None, 3, 3, 4), (None, 3, 3)],
        expected_num_trainable_weights=5,
        expected_num_non_trainable_weights=1,
        expected_num_seed_generators=1,
        expected_num_losses=1,
        training_changes_output=True,
    )
