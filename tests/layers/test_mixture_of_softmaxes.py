import keras
import numpy as np
from keras import ops

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


def test_head_probabilities_sum_to_one_and_serialize(tmp_path):
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
    path = str(tmp_path / "mos.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    np.testing.assert_allclose(
        ops.convert_to_numpy(loaded(x)),
        ops.convert_to_numpy(model(x)),
        atol=1e-6,
    )
