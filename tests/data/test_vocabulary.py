"""Tests of `Vocabulary` and `build_vocabulary`."""

import json

import numpy as np
import pytest

from keras_rnnlm.data import DataError
from keras_rnnlm.data import OOVError
from keras_rnnlm.data import Vocabulary
from keras_rnnlm.data import VocabularyFormatError
from keras_rnnlm.data import build_vocabulary

LINES = [["the", "cat", "sat"], ["the", "dog"], [], ["a", "dog", "sat"]]


def test_first_seen_order_is_deterministic():
    vocab = build_vocabulary(LINES)
    assert vocab.tokens == ["the", "cat", "sat", "<eos>", "dog", "a", "<unk>"]
    assert build_vocabulary(iter(LINES)) == vocab
    assert vocab.eos_id == 3
    assert vocab.unk_id == 6


def test_unk_in_data_keeps_its_position():
    vocab = build_vocabulary([["<unk>", "x"]], add_eos=False)
    assert vocab.tokens == ["<unk>", "x"]
    assert vocab.eos_id is None


def test_frequency_order_and_min_count():
    vocab = build_vocabulary(LINES, order="frequency")
    assert vocab.tokens[0] == "<eos>"
    assert vocab.tokens[1:4] == ["the", "sat", "dog"]
    assert vocab.tokens[-1] == "<unk>"
    vocab = build_vocabulary(LINES, min_count=2)
    assert vocab.tokens == ["the", "sat", "<eos>", "dog", "<unk>"]
    with pytest.raises(ValueError):
        build_vocabulary(LINES, order="alphabetical")


def test_no_unk_token():
    vocab = build_vocabulary(LINES, unk_token=None)
    assert "<unk>" not in vocab
    assert vocab.unk_id is None
    with pytest.raises(OOVError, match="'zebra'") as info:
        vocab.encode(["the", "zebra"])
    assert isinstance(info.value, KeyError)
    assert isinstance(info.value, DataError)


def test_lookup_encode_decode():
    vocab = Vocabulary(["a", "b", "<unk>", "<eos>"])
    assert len(vocab) == 4
    assert "a" in vocab and "z" not in vocab
    assert vocab.token_to_id("b") == 1
    assert vocab.id_to_token(np.int64(3)) == "<eos>"
    ids = vocab.encode(["a", "z", "b", "<eos>"])
    assert ids.dtype == np.int32
    assert ids.tolist() == [0, 2, 1, 3]
    assert vocab.is_oov("z") and not vocab.is_oov("a")
    assert vocab.decode(ids) == ["a", "<unk>", "b", "<eos>"]
    assert vocab.decode(np.array([[0, 1]])) == ["a", "b"]
    assert vocab.encode([]).shape == (0,)
    with pytest.raises(OOVError, match="'z'"):
        vocab.encode(["a", "z"], oov="error")
    with pytest.raises(OOVError):
        vocab.token_to_id("z")
    with pytest.raises(IndexError):
        vocab.id_to_token(4)
    tokens = vocab.tokens
    tokens.append("mutated")
    assert len(vocab) == 4


def test_constructor_validation():
    with pytest.raises(ValueError, match="Duplicate"):
        Vocabulary(["a", "a"])
    with pytest.raises(TypeError):
        Vocabulary(["a", 1])


def test_json_round_trip(tmp_path):
    vocab = build_vocabulary(LINES + [["é", '"quoted"']])
    text = vocab.to_json()
    config = json.loads(text)
    assert config["format"] == "keras_rnnlm.vocabulary"
    assert config["format_version"] == 1
    assert config["unk_token"] == "<unk>"
    assert config["eos_token"] == "<eos>"
    assert config["tokens"] == vocab.tokens
    assert "\n" in text  # indented, human-readable
    assert Vocabulary.from_json(text) == vocab
    path = tmp_path / "vocab.json"
    vocab.save(path)
    loaded = Vocabulary.load(path)
    assert loaded == vocab
    assert loaded.unk_id == vocab.unk_id
    assert loaded != Vocabulary(vocab.tokens, eos_token="</s>")


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        "[1, 2]",
        '{"format": "other", "format_version": 1, "tokens": []}',
        '{"format": "keras_rnnlm.vocabulary", "format_version": 99,'
        ' "tokens": []}',
        '{"format": "keras_rnnlm.vocabulary", "format_version": 1,'
        ' "tokens": [1]}',
        '{"format": "keras_rnnlm.vocabulary", "format_version": 1,'
        ' "tokens": ["a", "a"]}',
        '{"format": "keras_rnnlm.vocabulary", "format_version": 1,'
        ' "size": 3, "tokens": ["a"]}',
    ],
)
def test_malformed_json(text):
    with pytest.raises(VocabularyFormatError) as info:
        Vocabulary.from_json(text)
    assert isinstance(info.value, ValueError)
