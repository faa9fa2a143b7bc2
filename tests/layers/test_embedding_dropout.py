import numpy as np
from keras import ops

from keras_rnnlm.layers.embedding_dropout import EmbeddingDropout
from keras_rnnlm.layers.tied_embedding import TiedEmbedding


def test_whole_word_types_dropped_and_scaled():
    emb = TiedEmbedding(50, 8)
    drop = EmbeddingDropout(50, 0.5, seed=0)
    tokens = np.random.default_rng(0).integers(0, 50, (4, 30))
    e = emb(tokens)
    y = ops.convert_to_numpy(drop([tokens, e], training=True))
    e = ops.convert_to_numpy(e)
    zero_types = set()
    kept_types = set()
    for tok, row, orig in zip(
        tokens.ravel(), y.reshape(-1, 8), e.reshape(-1, 8)
    ):
        if np.all(row == 0):
            zero_types.add(int(tok))
        else:
            kept_types.add(int(tok))
            np.testing.assert_allclose(row, orig * 2.0, rtol=1e-6)
    # Every occurrence of a word type shares its fate (whole rows).
    assert zero_types and kept_types and not zero_types & kept_types


def test_inference_identity_and_config():
    drop = EmbeddingDropout(10, 0.1, seed=2)
    e = np.ones((1, 3, 4), "float32")
    out = drop([np.array([[1, 2, 3]]), e])
    np.testing.assert_array_equal(ops.convert_to_numpy(out), e)
    clone = EmbeddingDropout.from_config(drop.get_config())
    assert (clone.vocab_size, clone.rate) == (10, 0.1)
