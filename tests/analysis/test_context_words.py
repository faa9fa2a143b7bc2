"""The CBOW context probe (Table 1 of arXiv:2106.08927)."""

import numpy as np
import pytest

from keras_rnnlm.analysis.context_words import context_words
from keras_rnnlm.analysis.context_words import is_content_word
from keras_rnnlm.config import ModelConfig
from keras_rnnlm.data.vocabulary import Vocabulary
from keras_rnnlm.models import build_language_model


def test_nearest_words_to_the_context_vector():
    words = ["storm", "rain", "wind", "planet", "star", "orbit"]
    vocab = Vocabulary(["<eos>", "<unk>", *words])
    cfg = ModelConfig(
        embedding_dim=4,
        hidden_sizes=[4],
        context={"weighting": "uniform", "window": 5, "dim": 3},
    )
    model = build_language_model(cfg, len(vocab), 2, seed=0)
    table = np.zeros((len(vocab), 3), "float32")
    table[:2] = [0.0, 0.0, 1.0]
    for w in ("storm", "rain", "wind"):
        table[vocab.token_to_id(w)] = [1.0, 0.1, 0.0]
    for w in ("planet", "star", "orbit"):
        table[vocab.token_to_id(w)] = [0.1, 1.0, 0.0]
    table[vocab.token_to_id("wind")] = [1.0, 0.3, 0.0]
    model.get_layer("cbow_context").embeddings.assign(table)
    top = context_words(model, vocab, ["storm", "rain", "storm"], top=3)
    assert [w for w, _ in top][:2] in (["storm", "rain"], ["rain", "storm"])
    assert top[0][1] == pytest.approx(1.0)
    assert top[2][0] == "wind"
    with pytest.raises(ValueError, match="CBOW"):
        context_words(
            build_language_model(ModelConfig(), 8, 1), vocab, ["storm"]
        )


def test_content_words_skip_function_words_and_punctuation():
    assert is_content_word("storm") and is_content_word("Tropical")
    assert is_content_word("non-resolved") and is_content_word("Andromedae")
    for token in ("the", "The", "of", ",", "<unk>", "<eos>", "1996", "@-@"):
        assert not is_content_word(token), token
    words = ["the", "of", ",", "storm", "rain"]
    vocab = Vocabulary(["<eos>", "<unk>", *words])
    cfg = ModelConfig(
        embedding_dim=4,
        hidden_sizes=[4],
        context={"weighting": "uniform", "window": 5, "dim": 2},
    )
    model = build_language_model(cfg, len(vocab), 2, seed=0)
    table = np.zeros((len(vocab), 2), "float32")
    table[:] = [0.0, 1.0]
    for w in ("the", "of", ","):  # nearest to d, but not content words
        table[vocab.token_to_id(w)] = [1.0, 0.0]
    table[vocab.token_to_id("storm")] = [1.0, 0.2]
    table[vocab.token_to_id("rain")] = [1.0, 0.5]
    model.get_layer("cbow_context").embeddings.assign(table)
    text = ["the", "of", "the"]
    assert context_words(model, vocab, text, top=1)[0][0] in ("the", "of", ",")
    top = context_words(model, vocab, text, top=5, content_only=True)
    assert [w for w, _ in top] == ["storm", "rain"]
