"""Ctrl-C and SIGTERM on a real training process: one line naming the
checkpoint and the command that resumes (the recipe script the user
ran), the signal's exit status, a resume that says where it starts, and
a second signal that ends the process at once. A second training on the
run directory of a running one is refused in one line naming it."""

import json
import os
import queue
import shlex
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from run_dirs import newest_checkpoint
from tiny_configs import tiny_run_dict

RECIPE = '''
"""A tiny recipe."""

from keras_rnnlm.cli import recipe_main

PRESETS = {{"tiny": {preset}}}
DEFAULT_PRESET = "tiny"

if __name__ == "__main__":
    raise SystemExit(recipe_main(PRESETS, DEFAULT_PRESET, __doc__))
'''


def _preset(corpus_dir):
    return tiny_run_dict(
        corpus_dir,
        model={"embedding_dim": 8, "hidden_sizes": [8], "dropout": 0.1},
        train={
            "epochs": 40,  # still training when the signal comes
            "verbose": 2,
            "checkpoint_every_steps": 5,
            "jit_compile": False,
        },
    )


class _Process:
    """A process whose output lines are read as they come."""

    def __init__(self, args, cwd):
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("KERAS_RNNLM_DEBUG", None)
        self.p = subprocess.Popen(
            args,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines = queue.Queue()
        self.out = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.put(line)

    def wait_for(self, text, timeout=180):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                line = self.lines.get(timeout=1)
            except queue.Empty:
                assert self.p.poll() is None, self.p.stderr.read()
                continue
            self.out.append(line)
            if text in line:
                return line
        raise AssertionError(f"no {text!r} in {''.join(self.out)}")

    def stop(self, signum, timeout=120):
        self.p.send_signal(signum)
        code = self.p.wait(timeout)
        return code, self.p.stderr.read()


def _interrupted_line(err):
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, err
    return lines[-1]


@pytest.mark.slow
def test_ctrl_c_then_sigterm_on_a_recipe_script(tiny_corpus_dir, tmp_path):
    recipe = tmp_path / "tiny_recipe.py"
    recipe.write_text(RECIPE.format(preset=repr(_preset(tiny_corpus_dir))))
    run = tmp_path / "run"
    p = _Process([sys.executable, str(recipe), "--out", str(run)], tmp_path)
    p.wait_for(f"Starting a new run in {run}")
    p.wait_for("Epoch 2/40")  # a mid-epoch checkpoint is written by now
    code, err = p.stop(signal.SIGINT)
    assert code == 130
    line = _interrupted_line(err)
    assert line.startswith("tiny_recipe.py: interrupted by SIGINT: ")
    newest = newest_checkpoint(run)
    assert f"checkpoint {newest} (resumes at epoch " in line
    command = line.split("; resume with: ")[1]
    assert command == shlex.join(
        [sys.executable, str(recipe), "--out", str(run)]
    )
    state = json.load(open(os.path.join(newest, "state.json")))
    epoch, batch = state["epoch"] + 1, state["batches_done"]
    assert f"epoch {epoch}, batch {batch}/" in line
    assert not (run / "train.lock").exists()  # released on the signal

    # the printed command resumes where the checkpoint is
    p = _Process(shlex.split(command), tmp_path)
    resumed = p.wait_for("Resuming")
    assert resumed.startswith(f"Resuming {run} at epoch {epoch}/40")
    assert f"after batch {batch}/" in resumed
    p.wait_for(f"Epoch {epoch}/40 (resumed after batch {batch})")
    code, err = p.stop(signal.SIGTERM)
    assert code == 143
    assert "interrupted by SIGTERM" in _interrupted_line(err)
    assert not (run / "train.lock").exists()


@pytest.mark.slow
def test_a_second_training_on_the_same_out_is_refused(
    tiny_corpus_dir, tmp_path, capsys
):
    from keras_rnnlm.cli import main

    recipe = tmp_path / "tiny_recipe.py"
    recipe.write_text(RECIPE.format(preset=repr(_preset(tiny_corpus_dir))))
    run = tmp_path / "run"
    p = _Process([sys.executable, str(recipe), "--out", str(run)], tmp_path)
    p.wait_for("Epoch 1/40")
    config = (run / "config.json").read_text()
    # another learning rate, into the same directory: refused before it
    # writes anything
    code = main(
        [
            "train",
            str(recipe),
            "--out",
            str(run),
            "--set",
            "train.learning_rate=5",
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    host = socket.gethostname()
    assert err.startswith(
        f"keras-rnnlm train: error: {run} is in use by pid {p.p.pid} on "
        f"{host}, training there since "
    )
    assert err.endswith(
        f"({run / 'train.lock'}): wait for it to end or stop it, or give "
        "another --out\n"
    )
    assert len(err.splitlines()) == 1
    assert (run / "config.json").read_text() == config
    assert len((run / "runs.jsonl").read_text().splitlines()) == 1
    code, _ = p.stop(signal.SIGINT)
    assert code == 130
    assert not (run / "train.lock").exists()


SECOND_SIGNAL = textwrap.dedent(
    """
    import signal, sys, time
    from keras_rnnlm.callbacks import StopOnSignal

    stop = StopOnSignal(checkpoint=None)
    with stop.listening():
        signal.raise_signal(getattr(signal, sys.argv[1]))
        # the run would now finish its batch and write its checkpoint
        print("stopping", stop.requested, flush=True)
        time.sleep(120)
    """
)


@pytest.mark.parametrize(
    "name", ["SIGINT", pytest.param("SIGTERM", marks=pytest.mark.slow)]
)
def test_a_second_signal_ends_the_process_at_once(tmp_path, name):
    script = tmp_path / "second_signal.py"
    script.write_text(SECOND_SIGNAL)
    p = _Process([sys.executable, str(script), name], tmp_path)
    signum = getattr(signal, name)
    p.wait_for(f"stopping {int(signum)}")
    start = time.monotonic()
    code, _ = p.stop(signum, timeout=30)
    assert code == -signum  # the system's default action: no clean-up
    assert time.monotonic() - start < 10
