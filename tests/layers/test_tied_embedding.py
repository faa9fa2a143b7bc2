import keras
import numpy as np
from keras import ops

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


def test_shared_weights_in_model_and_serialization(tmp_path):
    emb = TiedEmbedding(13, 6)
    inp = keras.Input((None,), dtype="int32")
    out = emb(emb(inp), reverse=True)
    model = keras.Model(inp, out)
    # embeddings + one output bias, nothing duplicated
    assert len(model.trainable_weights) == 2
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    x = np.array([[1, 2, 3, 4]])
    np.testing.assert_allclose(
        ops.convert_to_numpy(model(x)),
        ops.convert_to_numpy(loaded(x)),
        atol=1e-6,
    )
