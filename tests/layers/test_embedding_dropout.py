import numpy as np
from keras import ops
from layer_testing import run_layer_test

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


def test_inference_identity():
    drop = EmbeddingDropout(10, 0.1, seed=2)
    e = np.ones((1, 3, 4), "float32")
    out = drop([np.array([[1, 2, 3]]), e])
    np.testing.assert_array_equal(ops.convert_to_numpy(out), e)


def test_layer_checks():
    tokens = np.array([[1, 2, 3, 1], [4, 5, 6, 7]], "int32")
    embedded = np.random.default_rng(0).normal(size=(2, 4, 3))
    run_layer_test(
        EmbeddingDropout,
        dict(vocab_size=10, rate=0.5, seed=2),
        [tokens, embedded.astype("float32")],
        expected_output_shape=(None, 4, 3),
        expected_num_trainable_weights=0,
        expected_num_seed_generators=1,
        training_changes_output=True,
    )
