"""Tests of the corpus registry."""

import re

import pytest

from keras_rnnlm.data import CORPORA
from keras_rnnlm.data import CorpusSpec
from keras_rnnlm.data import DataError
from keras_rnnlm.data import RemoteFile
from keras_rnnlm.data import UnknownCorpusError
from keras_rnnlm.data import get_corpus_spec
from keras_rnnlm.data.download import _pick_member


def test_known_corpora():
    assert set(CORPORA) == {
        "ptb",
        "ptb_char",
        "wikitext2",
        "wikitext103",
        "text8",
    }
    for name, spec in CORPORA.items():
        assert spec.name == name
        assert set(spec.files) == {"train", "valid", "test"}
        for remote in spec.files.values():
            assert remote.urls
            if remote.sha256 is not None:
                assert re.fullmatch(r"[0-9a-f]{64}", remote.sha256)


def test_spec_details():
    assert CORPORA["ptb"].files["train"].name == "train.txt"
    assert CORPORA["ptb"].files["train"].size == 5_101_618
    assert CORPORA["ptb_char"].char_format == "spaced"
    assert CORPORA["wikitext2"].subdir == "wikitext-2"
    assert CORPORA["wikitext2"].files["test"].name == "wiki.test.tokens"
    assert CORPORA["wikitext103"].files["train"].sha256 is None
    text8 = CORPORA["text8"]
    assert text8.split_rule == "text8"
    assert not text8.add_eos
    assert text8.char_format == "raw"
    assert len({id(f) for f in text8.files.values()}) == 1
    assert text8.files["train"].size == 100_000_000
    assert text8.files["train"].urls == ("http://mattmahoney.net/dc/text8.zip",)


def test_registry_hashes_match_shipped_sums(data_root):
    sums_file = data_root / "SHA256SUMS"
    if not sums_file.is_file():
        pytest.skip("no SHA256SUMS")
    sums = {}
    for line in sums_file.read_text().splitlines():
        digest, path = line.split(maxsplit=1)
        sums[path.lstrip("*").removeprefix("./")] = digest
    for name in ("ptb", "ptb_char", "wikitext2"):
        spec = CORPORA[name]
        for remote in spec.files.values():
            assert sums[f"{spec.subdir}/{remote.name}"] == remote.sha256


def test_unknown_corpus():
    with pytest.raises(UnknownCorpusError) as info:
        get_corpus_spec("penn_treebank")
    assert isinstance(info.value, KeyError)
    assert isinstance(info.value, DataError)
    message = str(info.value)
    for name in CORPORA:
        assert name in message


def test_alias_by_subdir():
    assert get_corpus_spec("wikitext-2") is CORPORA["wikitext2"]
    assert get_corpus_spec("ptb") is CORPORA["ptb"]


def test_spec_validation():
    files = {s: RemoteFile(name=f"{s}.txt") for s in ("train", "valid")}
    with pytest.raises(ValueError, match="test"):
        CorpusSpec(name="x", level="word", subdir="x", files=files)
    files["test"] = RemoteFile(name="test.txt")
    with pytest.raises(ValueError, match="level"):
        CorpusSpec(name="x", level="byte", subdir="x", files=files)
    with pytest.raises(ValueError, match="char_format"):
        CorpusSpec(name="x", level="char", subdir="x", files=files)


def test_archive_member_lenient_match():
    member = CORPORA["ptb_char"].files["train"].archive_member
    names = [
        "./simple-examples/data/ptb.train.txt",
        "./simple-examples/data/ptb.char.train.txt",
    ]
    assert _pick_member(names, member) == names[1]
    assert _pick_member(["simple-examples/data/ptb.char.train.txt"], member)
    assert _pick_member(["other/ptb.char.train.txt"], member) == (
        "other/ptb.char.train.txt"
    )
    word = CORPORA["ptb"].files["train"].archive_member
    assert _pick_member(names, word) == names[0]
    with pytest.raises(KeyError):
        _pick_member(["a/b.txt"], member)
