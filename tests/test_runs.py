"""Run directories: reading a run back and the files it names."""

import os

import pytest

from keras_rnnlm.runs import BEST_WEIGHTS_FILE
from keras_rnnlm.runs import CONFIG_FILE
from keras_rnnlm.runs import VOCAB_FILE
from keras_rnnlm.runs import atomic_write_text
from keras_rnnlm.runs import load_run
from keras_rnnlm.runs import run_weights


def test_load_run_says_what_is_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="No such file or directory"):
        load_run(str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError, match=f"no {CONFIG_FILE}"):
        load_run(str(tmp_path))
    (tmp_path / CONFIG_FILE).write_text("{}")
    with pytest.raises(FileNotFoundError, match=f"no {VOCAB_FILE}"):
        load_run(str(tmp_path))


def test_run_weights_are_the_best_unless_given(tmp_path):
    run = str(tmp_path)
    with pytest.raises(FileNotFoundError, match="not finished an epoch"):
        run_weights(run)
    (tmp_path / BEST_WEIGHTS_FILE).write_bytes(b"")
    assert run_weights(run) == os.path.join(run, BEST_WEIGHTS_FILE)
    with pytest.raises(FileNotFoundError, match="other.weights.h5"):
        run_weights(run, os.path.join(run, "other.weights.h5"))


def test_atomic_write_text_leaves_no_temporary(tmp_path):
    path = str(tmp_path / "results.json")
    atomic_write_text(path, "one")
    atomic_write_text(path, "two")
    assert open(path).read() == "two"
    assert os.listdir(tmp_path) == ["results.json"]
