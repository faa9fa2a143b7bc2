"""Shared fixtures of the `keras_rnnlm.data` tests."""

import os
import pathlib

import pytest


@pytest.fixture
def data_root():
    """The real corpora directory from `$KERAS_RNNLM_DATA` (else skip)."""
    root = os.environ.get("KERAS_RNNLM_DATA")
    if not root or not os.path.isdir(root):
        pytest.skip("KERAS_RNNLM_DATA does not point at a data directory")
    return pathlib.Path(root)


@pytest.fixture
def require_corpus():
    """A function that skips unless `root/subdir` holds all `names`."""

    def check(root, subdir, names):
        if not all((root / subdir / n).is_file() for n in names):
            pytest.skip(f"{subdir} not present under {root}")

    return check


@pytest.fixture
def isolated_env(tmp_path, monkeypatch):
    """No `$KERAS_RNNLM_DATA`, and a Keras cache inside `tmp_path`."""
    monkeypatch.delenv("KERAS_RNNLM_DATA", raising=False)
    home = tmp_path / "keras_home"
    monkeypatch.setenv("KERAS_HOME", str(home))
    return home
