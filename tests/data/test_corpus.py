"""Tests of corpus reading (`load_corpus`)."""

import dataclasses
import time
import tracemalloc

import numpy as np
import pytest

from keras_rnnlm.config import DataConfig
from keras_rnnlm.data import CORPORA
from keras_rnnlm.data import CorpusEncodingError
from keras_rnnlm.data import CorpusNotFoundError
from keras_rnnlm.data import CorpusTooShortError
from keras_rnnlm.data import DataError
from keras_rnnlm.data import EmptyCorpusError
from keras_rnnlm.data import UnknownCorpusError
from keras_rnnlm.data import Vocabulary
from keras_rnnlm.data import check_corpus_fits
from keras_rnnlm.data import load_corpus
from keras_rnnlm.data import registry
from keras_rnnlm.data import tokenize_line


def _write(directory, **splits):
    directory.mkdir(parents=True, exist_ok=True)
    for split, text in splits.items():
        (directory / split).write_text(text, encoding="utf-8", newline="")
    return directory


def _decode(corpus, split):
    return corpus.vocab.decode(corpus.split(split))


def test_tokenize_line():
    assert tokenize_line(" a b  c \n", "word") == ["a", "b", "c"]
    assert tokenize_line("a _ b \n", "char", "spaced") == ["a", "_", "b"]
    assert tokenize_line("a b\n", "char", "raw") == ["a", " ", "b"]
    with pytest.raises(ValueError):
        tokenize_line("a", "char")


def test_word_directory_corpus(tmp_path):
    root = _write(
        tmp_path / "c",
        **{
            "train.txt": " the cat \n\n \n the dog sat \n",
            "valid.txt": "the zebra\n",
            "test.txt": "a cat",  # no final newline: still one line
        },
    )
    corpus = load_corpus(root)
    eos = ["<eos>"]
    assert _decode(corpus, "train") == (
        ["the", "cat"] + eos + eos + eos + ["the", "dog", "sat"] + eos
    )
    assert corpus.vocab.tokens == ["the", "cat", "<eos>", "dog", "sat", "<unk>"]
    assert _decode(corpus, "valid") == ["the", "<unk>", "<eos>"]
    assert _decode(corpus, "test") == ["<unk>", "cat", "<eos>"]
    assert corpus.train.dtype == np.int32 and corpus.train.ndim == 1
    assert corpus.level == "word" and not corpus.is_char_level
    assert corpus.meta["num_tokens"] == {"train": 9, "valid": 3, "test": 3}
    assert corpus.meta["num_unk"]["valid"] == 1
    assert corpus.meta["source"] == "directory"
    assert len(corpus.meta["sha256"]["train"]) == 64
    with pytest.raises(KeyError, match="dev"):
        corpus.split("dev")


def test_trailing_whitespace_after_last_newline(tmp_path):
    root = _write(
        tmp_path / "c",
        **{"train.txt": "a b \n c \n ", "valid.txt": "", "test.txt": "\n"},
    )
    corpus = load_corpus(root)
    assert _decode(corpus, "train") == ["a", "b", "<eos>", "c", "<eos>"]
    assert _decode(corpus, "valid") == []
    assert _decode(corpus, "test") == ["<eos>"]


def test_wiki_tokens_names_and_vocab_reuse(tmp_path):
    root = _write(
        tmp_path / "w",
        **{
            "wiki.train.tokens": " = T = \n\n x y \n",
            "wiki.valid.tokens": " x \n",
            "wiki.test.tokens": " z \n",
        },
    )
    vocab = Vocabulary(["x", "<eos>", "<unk>"])
    corpus = load_corpus(root, vocab=vocab)
    assert corpus.vocab is vocab
    assert _decode(corpus, "train") == [
        "<unk>", "<unk>", "<unk>", "<eos>", "<eos>", "x", "<unk>", "<eos>"
    ]  # fmt: skip
    assert _decode(corpus, "test") == ["<unk>", "<eos>"]


def test_char_directory_corpus(tmp_path):
    root = _write(
        tmp_path / "c",
        **{"train.txt": "ab a\n\nb\n", "valid.txt": "ba\n", "test.txt": "a\n"},
    )
    corpus = load_corpus(root, level="char")
    assert corpus.is_char_level
    assert _decode(corpus, "train") == [
        "a", "b", " ", "a", "<eos>", "<eos>", "b", "<eos>"
    ]  # fmt: skip
    # Closed alphabet: no <unk> needed, none added.
    assert corpus.vocab.tokens == ["a", "b", " ", "<eos>"]
    assert corpus.vocab.unk_id is None


def test_char_corpus_unicode_and_unseen_symbols(tmp_path):
    root = _write(
        tmp_path / "c",
        **{"train.txt": "héé\n", "valid.txt": "hé€\n", "test.txt": "h"},
    )
    corpus = load_corpus(root, level="char")
    assert corpus.vocab.tokens == ["h", "é", "<eos>", "<unk>"]
    assert _decode(corpus, "valid") == ["h", "é", "<unk>", "<eos>"]
    assert _decode(corpus, "test") == ["h", "<eos>"]


def test_max_tokens(tmp_path):
    root = _write(
        tmp_path / "c",
        **{"train.txt": "a b c d\n", "valid.txt": "a b\n", "test.txt": "e\n"},
    )
    corpus = load_corpus(root, max_tokens=3)
    assert _decode(corpus, "train") == ["a", "b", "c"]
    assert _decode(corpus, "valid") == ["a", "b", "<eos>"]
    assert _decode(corpus, "test") == ["<unk>", "<eos>"]
    assert len(corpus.vocab) == 6  # from the full training split
    assert corpus.meta["num_tokens_full"]["train"] == 5
    with pytest.raises(ValueError):
        load_corpus(root, max_tokens=0)


def test_max_train_tokens_truncates_only_the_training_split(tmp_path):
    root = _write(
        tmp_path / "c",
        **{"train.txt": "a b c d\n", "valid.txt": "a b\n", "test.txt": "e\n"},
    )
    corpus = load_corpus(root, max_train_tokens=2)
    assert _decode(corpus, "train") == ["a", "b"]
    assert _decode(corpus, "valid") == ["a", "b", "<eos>"]
    assert _decode(corpus, "test") == ["<unk>", "<eos>"]
    assert len(corpus.vocab) == 6  # from the full training split
    assert corpus.meta["num_tokens_full"]["train"] == 5
    assert corpus.meta["max_train_tokens"] == 2
    with pytest.raises(ValueError, match="max_train_tokens"):
        load_corpus(root, max_train_tokens=0)


def test_a_truncated_split_holds_only_its_own_ids(tmp_path):
    # A truncated split is a copy, not a view that keeps the whole
    # split's ids alive (WikiText-103 with data.max_train_tokens).
    root = _write(
        tmp_path / "c",
        **{"train.txt": "a b c d\n", "valid.txt": "a b\n", "test.txt": "e\n"},
    )
    corpus = load_corpus(root, max_train_tokens=2)
    assert corpus.train.base is None and corpus.train.nbytes == 8
    corpus = load_corpus(root, max_tokens=3)
    for split in ("train", "valid", "test"):
        assert corpus.split(split).base is None


def test_a_load_holds_one_piece_of_token_strings_at_a_time(tmp_path):
    # 400,000 tokens of 1,000 types: a Python string per token of the
    # whole split at once (some 60 bytes each) is ~25 MB, which Python's
    # allocator then keeps for the rest of the process, pinned by the
    # vocabulary's strings among them; a piece of the text at a time holds
    # the text, the ids and one piece's strings.
    rng = np.random.default_rng(0)
    words = np.array([f"w{i:03d}" for i in range(1000)])
    lines = words[rng.integers(0, len(words), (20_000, 20))]
    text = "\n".join(" ".join(line) for line in lines) + "\n"
    root = _write(
        tmp_path / "c",
        **{"train.txt": text, "valid.txt": "w001\n", "test.txt": "w002\n"},
    )
    tracemalloc.start()
    try:
        corpus = load_corpus(root)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    n = len(corpus.train)
    assert n == 420_000
    assert _decode(corpus, "train")[:21] == [*lines[0], "<eos>"]
    assert peak < 30 * n  # bytes a token; a string each is ~70


def test_empty_training_file(tmp_path):
    root = _write(
        tmp_path / "c",
        **{"train.txt": "", "valid.txt": "a\n", "test.txt": "a\n"},
    )
    with pytest.raises(EmptyCorpusError, match="train"):
        load_corpus(root)
    _write(root, **{"train.txt": " \n\n"})
    with pytest.raises(EmptyCorpusError):
        load_corpus(root)


def test_missing_split_file(tmp_path):
    root = _write(tmp_path / "c", **{"train.txt": "a\n", "test.txt": "a\n"})
    with pytest.raises(CorpusNotFoundError, match="valid"):
        load_corpus(root)


def test_bad_names(tmp_path):
    with pytest.raises(UnknownCorpusError, match="ptb"):
        load_corpus("penn")
    with pytest.raises(CorpusNotFoundError):
        load_corpus(str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="word"):
        load_corpus("ptb", level="char", download=False)


BOM = "\ufeff"


@pytest.mark.parametrize("level", ["word", "char"])
def test_a_byte_order_mark_is_not_a_token(tmp_path, level):
    """A UTF-8 byte-order mark at the start of a file (as Notepad writes
    it) is dropped: the vocabulary and every split's ids are those of the
    same text without it."""
    texts = {
        "train.txt": "the cat sat\nthe dog\n",
        "valid.txt": "the cat\n",
        "test.txt": "a dog\n",
    }
    plain = load_corpus(_write(tmp_path / "plain", **texts), level=level)
    marked = load_corpus(
        _write(tmp_path / "bom", **{k: BOM + v for k, v in texts.items()}),
        level=level,
    )
    assert marked.vocab.tokens == plain.vocab.tokens
    for split in ("train", "valid", "test"):
        np.testing.assert_array_equal(marked.split(split), plain.split(split))
    assert marked.meta["num_tokens"] == plain.meta["num_tokens"]


def test_a_non_utf8_file_names_the_file_line_and_offset(tmp_path):
    root = _write(
        tmp_path / "c",
        **{"train.txt": "a b\n", "valid.txt": "a\n", "test.txt": "a\n"},
    )
    # Latin-1 "café" on the third line, after a BOM.
    (root / "valid.txt").write_bytes(b"\xef\xbb\xbfa b\nc\nthe caf\xe9\n")
    with pytest.raises(CorpusEncodingError) as raised:
        load_corpus(root)
    message = str(raised.value)
    assert str(root / "valid.txt") in message
    assert "line 3 (byte offset 16)" in message and "0xe9" in message
    assert isinstance(raised.value, DataError)
    assert "\n" not in message


def _fits(root, **data):
    d = DataConfig(corpus=str(root), **data)
    corpus = load_corpus(
        root, max_tokens=d.max_tokens, max_train_tokens=d.max_train_tokens
    )
    check_corpus_fits(corpus, d)


@pytest.mark.parametrize(
    "split, text, data, expects",
    [
        ("valid.txt", "", {}, "valid split of"),
        ("test.txt", "", {}, "test split of"),
        # "a b c" and its <eos>: 4 tokens, 2 streams of 3 tokens need 6.
        (
            "valid.txt",
            "a b c",
            {"eval_batch_size": 2},
            "data.eval_batch_size=2 is too large for the valid split",
        ),
        (
            "valid.txt",
            "a b c",
            {"eval_batch_size": None, "batch_size": 2},
            "data.batch_size=2 is too large for the valid split",
        ),
        (
            "test.txt",
            "a b c",
            {"eval_bptt": 4},
            "data.test_batch_size=1 is too large for the test split",
        ),
        (
            "train.txt",
            "a b c d e f g h i\n",
            {"batch_size": 4},
            "data.batch_size=4 is too large for the train split",
        ),
    ],
)
def test_every_split_must_hold_a_window_per_stream(
    tmp_path, split, text, data, expects
):
    texts = {"train.txt": "a b c d e f g h i\n" * 20}
    texts.update({"valid.txt": "a b c d e\n", "test.txt": "a b c d e\n"})
    texts[split] = text
    root = _write(tmp_path / "c", **texts)
    data = {"batch_size": 2, "bptt": 2, "eval_batch_size": 1, **data}
    error = EmptyCorpusError if not text else CorpusTooShortError
    with pytest.raises(error) as raised:
        _fits(root, **data)
    message = str(raised.value)
    assert expects in message and str(root / split) in message
    if error is CorpusTooShortError:
        assert message.startswith(raised.value.key + "=")
    texts[split] = "a b c d e f g h i j k l m n o p q r s t u v w x y z\n"
    _fits(_write(tmp_path / "c", **texts), **data)  # long enough


def test_the_window_rule_counts_whole_windows(tmp_path):
    """``batch_size * (bptt + 1)`` tokens: every stream has one whole
    window of ``bptt`` targets; one token fewer is refused."""
    root = _write(
        tmp_path / "c",
        **{"train.txt": "a\n" * 10, "valid.txt": "a\n", "test.txt": "a\n"},
    )  # 20 tokens (each line and its <eos>), 2 in valid and test
    small = {"eval_batch_size": 1, "eval_bptt": 1}
    _fits(root, batch_size=4, bptt=4, **small)  # 4 x 5 = 20
    with pytest.raises(CorpusTooShortError, match="4 x 6 = 24 tokens"):
        _fits(root, batch_size=4, bptt=5, **small)
    with pytest.raises(CorpusTooShortError, match="cut from 20 by data.max_"):
        _fits(root, batch_size=4, bptt=4, max_train_tokens=19, **small)


@pytest.fixture
def small_text8(tmp_path, monkeypatch, isolated_env):
    """text8 registry entry without the 1e8-byte size, and a 1,000-char file."""
    remote = dataclasses.replace(CORPORA["text8"].files["train"], size=None)
    spec = dataclasses.replace(
        CORPORA["text8"], files={s: remote for s in ("train", "valid", "test")}
    )
    monkeypatch.setitem(registry.CORPORA, "text8", spec)
    rng = np.random.default_rng(0)
    letters = np.array(list(" abcdefghijklmnopqrstuvwxyz"))
    text = "".join(rng.choice(letters, size=1000))
    (tmp_path / "text8").mkdir()
    (tmp_path / "text8" / "text8").write_text(text)
    return tmp_path, text


def test_text8_proportional_split(small_text8):
    root, text = small_text8
    corpus = load_corpus("text8", data_dir=root, download=False)
    assert corpus.is_char_level
    assert corpus.meta["split_rule"] == "text8"
    assert [len(corpus.split(s)) for s in ("train", "valid", "test")] == [
        900,
        50,
        50,
    ]
    assert "".join(_decode(corpus, "train")) == text[:900]
    assert "".join(_decode(corpus, "valid")) == text[900:950]
    assert "".join(_decode(corpus, "test")) == text[950:]
    assert "<eos>" not in corpus.vocab
    assert len(corpus.vocab) == len(set(text[:900])) + (
        0 if set(text[900:]) <= set(text[:900]) else 1
    )


# --- real corpora ---------------------------------------------------------

EXPECTED = {
    "ptb": ((929_589, 73_760, 82_430), 10_000),
    "ptb_char": ((5_017_482, 393_042, 442_423), 50),
    "wikitext2": ((2_088_628, 217_646, 245_569), 33_278),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_corpus_counts(name, data_root, require_corpus):
    spec = CORPORA[name]
    require_corpus(
        data_root, spec.subdir, [f.name for f in spec.files.values()]
    )
    start = time.perf_counter()
    corpus = load_corpus(name, data_dir=data_root, download=False)
    elapsed = time.perf_counter() - start
    counts, vocab_size = EXPECTED[name]
    assert tuple(len(corpus.split(s)) for s in ("train", "valid", "test")) == (
        counts
    )
    assert len(corpus.vocab) == vocab_size
    assert corpus.vocab.eos_id is not None
    for split in ("train", "valid", "test"):
        ids = corpus.split(split)
        assert ids.dtype == np.int32
        assert 0 <= ids.min() and ids.max() < vocab_size
        assert corpus.meta["sha256"][split] == spec.files[split].sha256
    if name == "ptb":
        # Same first-seen ids as pytorch/examples and awd-lstm-lm.
        assert corpus.vocab.tokens[:3] == ["aer", "banknote", "berlitz"]
        assert corpus.vocab.id_to_token(int(corpus.train[-1])) == "<eos>"
        assert elapsed < 4.0  # about 0.4 s on an idle core
    if name == "ptb_char":
        assert corpus.vocab.unk_id is None
        assert "_" in corpus.vocab
    if name == "wikitext2":
        assert corpus.vocab.tokens[0] == "<eos>"  # the first line is blank
