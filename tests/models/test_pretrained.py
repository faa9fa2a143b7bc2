"""``model.pretrained_embeddings``: embedding tables initialised from a
word2vec file (:mod:`keras_rnnlm.models.pretrained`)."""

import dataclasses

import numpy as np
import pytest
from gensim.models import KeyedVectors

from keras_rnnlm.config import ConfigError
from keras_rnnlm.config import ModelConfig
from keras_rnnlm.config import RunConfig
from keras_rnnlm.config import apply_overrides
from keras_rnnlm.data.vocabulary import Vocabulary
from keras_rnnlm.models import build_language_model
from keras_rnnlm.models import validate_model_config
from keras_rnnlm.models.pretrained import apply_pretrained_embeddings
from keras_rnnlm.models.pretrained import describe
from keras_rnnlm.models.pretrained import embedding_matrix
from keras_rnnlm.models.pretrained import load_word2vec

DIM = 6
WORDS = ["<unk>", "<eos>", "the", "cat", "sees", "a", "dog", "fish"]
#: in the file: every word but "dog" and "fish", plus one not in WORDS
IN_FILE = ["the", "<eos>", "cat", "zebra", "sees", "a", "<unk>"]


@pytest.fixture
def vocab():
    return Vocabulary(WORDS)


def _vectors(words=IN_FILE, dim=DIM, seed=0):
    rng = np.random.default_rng(seed)
    kv = KeyedVectors(vector_size=dim)
    kv.add_vectors(words, rng.normal(size=(len(words), dim)).astype("f4"))
    return kv


@pytest.fixture(params=["w2v.txt", "w2v.bin"])
def w2v_file(tmp_path, request):
    path = str(tmp_path / request.param)
    _vectors().save_word2vec_format(path, binary=path.endswith(".bin"))
    return path


def _config(path, head="softmax", context=True, **spec):
    return ModelConfig(
        embedding_dim=DIM,
        hidden_sizes=[DIM],
        head=head,
        init_range=0.05,
        context={"type": "cbow", "dim": DIM} if context else None,
        pretrained_embeddings={"path": path, **spec},
    )


def _build(config, vocab):
    return build_language_model(
        config, len(vocab), None, stateful=False, seed=0
    )


def _table(model, name):
    return np.asarray(model.get_layer(name).embeddings.value)


# -- config keys ---------------------------------------------------------


@pytest.mark.parametrize(
    "value, match",
    [
        ({"path": "x", "bin": True}, "Unknown key"),
        ({"binary": True}, "needs model.pretrained_embeddings.path"),
        ({}, "needs model.pretrained_embeddings.path"),
        ({"path": 3}, "pretrained_embeddings.path must be"),
        ({"path": "x", "binary": "yes"}, "pretrained_embeddings.binary"),
        ({"path": "x", "cbow": 1}, "pretrained_embeddings.cbow must be"),
        ("x.bin", "model.pretrained_embeddings must be"),
    ],
)
def test_bad_config_values(value, match):
    with pytest.raises(ConfigError, match=match):
        RunConfig.from_dict({"model": {"pretrained_embeddings": value}})


def test_set_override_and_json_round_trip():
    config = apply_overrides(
        RunConfig(),
        ['model.pretrained_embeddings={"path": "w.bin", "cbow": false}'],
    )
    spec = config.model.pretrained_embeddings
    assert spec == {"path": "w.bin", "cbow": False}
    assert RunConfig.from_dict(config.to_dict()) == config


def test_cbow_needs_a_context_and_one_hot_has_no_table():
    with pytest.raises(ConfigError, match="model.context"):
        validate_model_config(_config("w.bin", context=False, cbow=True))
    validate_model_config(_config("w.bin", context=False))
    one_hot = dataclasses.replace(
        _config("w.bin", context=False), input_encoding="one_hot"
    )
    with pytest.raises(ConfigError, match="one_hot"):
        validate_model_config(one_hot)


# -- reading files ---------------------------------------------------------


def test_text_and_binary_files_are_read_by_name(w2v_file):
    kv = load_word2vec(w2v_file)
    assert kv.index_to_key == IN_FILE
    np.testing.assert_allclose(kv.vectors, _vectors().vectors, atol=1e-6)


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="no such word2vec file"):
        load_word2vec(str(tmp_path / "none.bin"))


def test_wrong_format_is_a_config_error(tmp_path):
    path = str(tmp_path / "w2v.bin")
    _vectors().save_word2vec_format(path, binary=True)
    with pytest.raises(ConfigError, match="binary=true"):
        load_word2vec(path, binary=False)


# -- the matrix --------------------------------------------------------------


def test_matrix_rows_and_missing_words():
    kv = _vectors()
    initial = np.arange(len(WORDS) * DIM, dtype="f4").reshape(-1, DIM)
    matrix, missing = embedding_matrix(kv, WORDS, initial)
    assert missing == ["dog", "fish"]
    for i, word in enumerate(WORDS):
        expected = initial[i] if word in missing else kv[word]
        np.testing.assert_array_equal(matrix[i], expected)
    assert initial[0, 0] == 0  # the initial matrix is not changed


def test_dimension_mismatch_is_a_config_error():
    kv = _vectors(dim=DIM + 1)
    with pytest.raises(ConfigError, match=f"{DIM + 1} dimensions.*{DIM}"):
        embedding_matrix(kv, WORDS, np.zeros((len(WORDS), DIM), "f4"))


# -- on a built model ---------------------------------------------------------


@pytest.mark.parametrize("head", ["softmax", "tied"])
def test_input_embedding_only_by_default(w2v_file, vocab, head):
    config = _config(w2v_file, head=head)
    model = _build(config, vocab)
    emb0, cbow0 = _table(model, "embedding"), _table(model, "cbow_context")
    summary = apply_pretrained_embeddings(model, vocab, config)
    assert summary["tables"] == ["embedding"]
    assert (summary["found"], summary["missing"]) == (6, 2)
    assert summary["missing_words"] == ["dog", "fish"]
    assert "6 of 8 words found, 2 missing" in describe(summary)
    emb, kv = _table(model, "embedding"), _vectors()
    for i, word in enumerate(WORDS):
        if word in ("dog", "fish"):
            np.testing.assert_array_equal(emb[i], emb0[i])
        else:
            np.testing.assert_allclose(emb[i], kv[word], atol=1e-6)
            assert not np.allclose(emb[i], emb0[i])
    np.testing.assert_array_equal(_table(model, "cbow_context"), cbow0)


def test_cbow_table_on_request(w2v_file, vocab):
    config = _config(w2v_file, cbow=True)
    model = _build(config, vocab)
    cbow0 = _table(model, "cbow_context")
    summary = apply_pretrained_embeddings(model, vocab, config)
    assert summary["tables"] == ["embedding", "cbow_context"]
    cbow, emb = _table(model, "cbow_context"), _table(model, "embedding")
    found = [i for i, w in enumerate(WORDS) if w in IN_FILE]
    np.testing.assert_array_equal(cbow[found], emb[found])
    # missing words keep each table's own random init
    np.testing.assert_array_equal(cbow[-2:], cbow0[-2:])
    assert not np.allclose(cbow[-2:], emb[-2:])


def test_nothing_to_do_without_the_key(vocab):
    config = dataclasses.replace(_config("unused"), pretrained_embeddings=None)
    model = _build(config, vocab)
    before = _table(model, "embedding")
    assert apply_pretrained_embeddings(model, vocab, config) is None
    np.testing.assert_array_equal(_table(model, "embedding"), before)


def test_model_size_mismatch_names_both_sizes(tmp_path, vocab):
    path = str(tmp_path / "w2v.txt")
    _vectors(dim=4).save_word2vec_format(path)
    config = _config(path)
    with pytest.raises(ConfigError, match="4 dimensions, the table has 6"):
        apply_pretrained_embeddings(_build(config, vocab), vocab, config)
