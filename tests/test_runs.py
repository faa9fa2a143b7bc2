"""Run directories: reading a run back and the files it names, the
verified reading of weights, the best weights' replacement and the lock."""

import errno
import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from keras_rnnlm.data.download import sha256_file
from keras_rnnlm.runs import BEST_FILE
from keras_rnnlm.runs import BEST_PREVIOUS_WEIGHTS_FILE
from keras_rnnlm.runs import BEST_WEIGHTS_FILE
from keras_rnnlm.runs import CONFIG_FILE
from keras_rnnlm.runs import LOCK_FILE
from keras_rnnlm.runs import VOCAB_FILE
from keras_rnnlm.runs import RunFileError
from keras_rnnlm.runs import RunLockedError
from keras_rnnlm.runs import atomic_write_text
from keras_rnnlm.runs import load_run
from keras_rnnlm.runs import run_lock
from keras_rnnlm.runs import run_weights
from keras_rnnlm.runs import weights_file_problem
from keras_rnnlm.runs import write_best_weights
from keras_rnnlm.runs import write_point


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
    _weights_file(tmp_path / BEST_WEIGHTS_FILE)
    assert run_weights(run) == os.path.join(run, BEST_WEIGHTS_FILE)
    with pytest.raises(FileNotFoundError, match="other.weights.h5"):
        run_weights(run, os.path.join(run, "other.weights.h5"))


def test_atomic_write_text_leaves_no_temporary(tmp_path):
    path = str(tmp_path / "results.json")
    atomic_write_text(path, "one")
    atomic_write_text(path, "two")
    assert open(path).read() == "two"
    assert os.listdir(tmp_path) == ["results.json"]


def _weights_file(path, value=0.5):
    """A small ``.weights.h5`` file in Keras's layout, every value
    ``value``."""
    import h5py

    with h5py.File(path, "w") as f:
        f.create_dataset("layers/dense/vars/0", data=np.full((3, 2), value))
        f.create_dataset("layers/dense/vars/1", data=np.zeros(2, "int64"))
    return str(path)


def test_weights_files_are_checked_when_read(tmp_path):
    path = _weights_file(tmp_path / "w.weights.h5")
    assert weights_file_problem(path) is None
    _weights_file(path, np.nan)
    assert weights_file_problem(path) == (
        "non-finite values (NaN or infinity) in layers/dense/vars/0"
    )
    with pytest.raises(RunFileError, match=f"^{path}: non-finite values"):
        run_weights(str(tmp_path), path)
    _weights_file(path)
    os.truncate(path, os.path.getsize(path) // 2)
    assert weights_file_problem(path).startswith(
        "not a readable weights file (Unable to synchronously open file"
    )
    with open(path, "wb") as f:
        f.write(bytes(1000))  # zeroed
    assert "not a readable weights file" in weights_file_problem(path)


def _save_value(value):
    return lambda path: _weights_file(path, value)


def test_best_weights_are_replaced_with_a_record_and_the_previous_kept(
    tmp_path,
):
    run = str(tmp_path)
    write_best_weights(run, _save_value(1.0), {"epoch": 0, "val_loss": 3.0})
    first = open(tmp_path / BEST_WEIGHTS_FILE, "rb").read()
    assert not (tmp_path / BEST_PREVIOUS_WEIGHTS_FILE).exists()
    write_best_weights(run, _save_value(2.0), {"epoch": 1, "val_loss": 2.0})
    record = json.loads((tmp_path / BEST_FILE).read_text())
    assert record["epoch"] == 1 and record["val_loss"] == 2.0
    assert record["sha256"] == sha256_file(tmp_path / BEST_WEIGHTS_FILE)
    previous = record["previous"]
    assert previous["epoch"] == 0 and previous["val_loss"] == 3.0
    assert (tmp_path / BEST_PREVIOUS_WEIGHTS_FILE).read_bytes() == first
    assert previous["sha256"] == sha256_file(
        tmp_path / BEST_PREVIOUS_WEIGHTS_FILE
    )
    assert sorted(os.listdir(tmp_path)) == [
        BEST_FILE,
        BEST_PREVIOUS_WEIGHTS_FILE,
        BEST_WEIGHTS_FILE,
    ]
    assert run_weights(run) == str(tmp_path / BEST_WEIGHTS_FILE)


def test_bad_best_weights_fall_back_to_the_previous_in_one_line(
    tmp_path, capsys
):
    run = str(tmp_path)
    best = str(tmp_path / BEST_WEIGHTS_FILE)
    previous = str(tmp_path / BEST_PREVIOUS_WEIGHTS_FILE)
    write_best_weights(run, _save_value(1.0), {"epoch": 0, "val_loss": 3.0})
    write_best_weights(run, _save_value(2.0), {"epoch": 1, "val_loss": 2.0})
    os.truncate(best, 1000)
    assert run_weights(run) == previous
    assert capsys.readouterr().err == (
        f"{best}: its SHA-256 is not the one best.json records (a corrupt "
        f"or replaced file); using the previous best weights {previous} "
        "(epoch 1) instead\n"
    )
    # NaN weights whose digest is the recorded one (written so); the
    # corrupt best weights they replace are not kept
    write_best_weights(run, _save_value(np.nan), {"epoch": 2, "val_loss": 1.0})
    assert run_weights(run) == previous
    err = capsys.readouterr().err
    assert err.startswith(f"{best}: non-finite values (NaN or infinity)")
    assert err.endswith(f"{previous} (epoch 1) instead\n")
    os.truncate(previous, 1000)
    with pytest.raises(RunFileError) as e:
        run_weights(run)
    assert str(e.value).startswith(f"{best}: non-finite values")
    assert "no good previous best weights" in str(e.value)


def test_a_full_disk_names_the_file(tmp_path):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    path = str(tmp_path / "results.json")
    os.symlink("/dev/full", path + ".tmp")  # every write: ENOSPC
    with pytest.raises(OSError) as e:
        atomic_write_text(path, "{}")
    assert e.value.errno == errno.ENOSPC and e.value.filename == path
    assert os.listdir(tmp_path) == []


def test_a_run_directory_has_one_writer(tmp_path, capsys):
    run = str(tmp_path)
    lock = os.path.join(run, LOCK_FILE)
    with run_lock(run):
        owner = json.loads(open(lock).read())
        assert owner["pid"] == os.getpid()
        with pytest.raises(RunLockedError) as e:
            with run_lock(run):
                pass
        assert str(e.value) == (
            f"{run} is in use by pid {os.getpid()} on {owner['host']}, "
            f"training there since {owner['since']} ({lock}): wait for it "
            "to end or stop it, or give another --out"
        )
    assert not os.path.exists(lock)  # released
    with pytest.raises(KeyError):
        with run_lock(run):
            raise KeyError("an error in the block")
    assert not os.path.exists(lock)
    assert capsys.readouterr().err == ""


def test_a_lock_left_by_a_dead_process_is_taken_over(tmp_path, capsys):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
    )
    pid = int(dead.stdout)
    run = str(tmp_path)
    lock = tmp_path / LOCK_FILE
    host = socket.gethostname()
    lock.write_text(
        json.dumps({"pid": pid, "host": host, "since": "2024-01-02 03:04:05"})
    )
    with run_lock(run):
        assert json.loads(lock.read_text())["pid"] == os.getpid()
    assert capsys.readouterr().err == (
        f"{run}: taking over the lock of pid {pid} on {host} (since "
        "2024-01-02 03:04:05): that process is gone\n"
    )
    # a lock of another host is not taken over: its process may live
    lock.write_text(json.dumps({"pid": pid, "host": "elsewhere", "since": "x"}))
    with pytest.raises(
        RunLockedError, match=f"if that process is gone, remove {lock}"
    ):
        with run_lock(run):
            pass


def test_write_points_are_named():
    with pytest.raises(ValueError, match="WRITE_POINTS"):
        write_point("no.such.point")
    write_point("lock.taken")  # no KERAS_RNNLM_KILL_AT: nothing happens
