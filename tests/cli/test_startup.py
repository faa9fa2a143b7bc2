"""TensorFlow's C++ start-up lines are silenced unless the user set
``TF_CPP_MIN_LOG_LEVEL``."""

import os
import subprocess
import sys

CODE = (
    "import keras_rnnlm.cli\n"
    "import tensorflow as tf\n"
    "print(float(tf.reduce_sum(tf.ones((2, 2)))))\n"
)


def _run(**env):
    environ = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TF_CPP_MIN_LOG_LEVEL", "KERAS_BACKEND")
    }
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-c", CODE],
        capture_output=True,
        text=True,
        env=environ,
        timeout=240,
    )


def test_start_up_prints_nothing_on_stderr():
    p = _run()
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "4.0"
    assert p.stderr.strip() == "", p.stderr


def test_a_user_setting_is_kept():
    p = _run(TF_CPP_MIN_LOG_LEVEL="0")
    assert p.returncode == 0, p.stderr
    # The user's level is respected: the import is not silenced, so the
    # oneDNN / CUDA probing lines (when this TensorFlow prints any) show.
    code = (
        "import os, keras_rnnlm.cli; print(os.environ['TF_CPP_MIN_LOG_LEVEL'])"
    )
    q = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "1"},
        timeout=240,
    )
    assert q.stdout.strip() == "1"
