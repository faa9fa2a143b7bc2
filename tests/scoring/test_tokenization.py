"""The one input contract of every scoring path."""

import pytest

from keras_rnnlm.scoring.tokenization import Tokenization
from keras_rnnlm.scoring.tokenization import sentence_text
from keras_rnnlm.scoring.tokenization import sentence_texts


@pytest.mark.parametrize(
    "item, text",
    [
        ("the cat", "the cat"),
        (b"the cat", "the cat"),
        (bytearray(b"a \xff b"), "a \ufffd b"),
        ("a \ud800 b", "a \ufffd b"),  # a lone surrogate
        ("\udcff\ud83d", "\ufffd\ufffd"),
        ("a\x00b\r", "a\x00b\r"),  # NUL and CR are characters
    ],
)
def test_sentence_text(item, text):
    assert sentence_text(item) == text


@pytest.mark.parametrize("item", [None, 3, 2.5, ["a"], ("a",), object()])
def test_a_non_text_sentence_is_a_type_error(item):
    with pytest.raises(TypeError, match=type(item).__name__):
        sentence_text(item)


@pytest.mark.parametrize("sentences", ["one string", b"bytes", None, 5])
def test_a_non_list_of_sentences_is_a_type_error(sentences):
    with pytest.raises(TypeError, match="list of sentences"):
        sentence_texts(sentences)


def test_any_iterable_of_sentences():
    assert sentence_texts(s for s in ("a", b"b")) == ["a", "b"]


def test_tokenization_applies_the_contract():
    words = Tokenization("whitespace")
    assert words("a \ud800 b\n") == ["a", "\ufffd", "b"]
    assert words("a\x00b\tc\rd\x1ce") == ["a\x00b", "c", "d", "e"]
    chars = Tokenization("chars", space_token="_")
    assert chars(b"a \xffb") == ["a", "_", "\ufffd", "b"]
