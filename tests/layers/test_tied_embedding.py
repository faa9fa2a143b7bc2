import keras
import numpy as np
from keras import ops
from layer_testing import run_layer_test

from keras_rnnlm.layers import TiedEmbedding


def test_reverse_uses_transposed_embeddings_and_bias():
    emb = TiedEmbedding(11, 4)
    h = emb(np.array([[1, 2, 3]]))
    assert tuple(h.shape) == (1, 3, 4)
    emb.output_bias.assign(np.arange(11, dtype="float32"))
    feats = np.random.default_rng(0).normal(size=(2, 3, 4)).astype("float32")
    logits = ops.convert_to_numpy(emb(feats, reverse=True))
    expect = feats @ ops.convert_to_numpy(emb.embeddings).T + np.arange(11)
    np.testing.assert_allclose(logits, expect, atol=1e-5)


def test_shared_weights_in_model():
    emb = TiedEmbedding(13, 6)
    inp = keras.Input((None,), dtype="int32")
    out = emb(emb(inp), reverse=True)
    model = keras.Model(inp, out)
    # embeddings + one output bias, nothing duplicated
    assert len(model.trainable_weights) == 2


def test_layer_checks_embed():
    run_layer_test(
        TiedEmbedding,
        dict(input_dim=13, output_dim=4),
        np.array([[1, 2, 3], [12, 0, 5]], "int32"),
        expected_output_shape=(None, 3, 4),
        expected_num_trainable_weights=2,
    )


def test_layer_checks_decode():
    """Reverse mode: the output bias is used (and saved)."""
    h = np.random.default_rng(0).normal(size=(2, 3, 4)).astype("float32")
    run_layer_test(
        TiedEmbedding,
        dict(input_dim=13, output_dim=4, output_bias_initializer="ones"),
        h,
        call_kwargs=dict(reverse=True),
        expected_output_shape=(None, 3, 13),
        expected_num_trainable_weights=2,
    )
