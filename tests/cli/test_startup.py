"""TensorFlow's C++ start-up lines are filtered by
``TF_CPP_MIN_LOG_LEVEL`` (3 unless the user set it)."""

import os

import pytest
from user_process import run_as_user

from keras_rnnlm._startup import filter_log_lines

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
RECIPE = os.path.join(ROOT, "recipes", "zaremba_ptb.py")

CODE = (
    "import os\n"
    "import keras_rnnlm.cli\n"
    "import tensorflow as tf\n"
    "print(float(tf.reduce_sum(tf.ones((2, 2)))))\n"
    "print(os.environ['TF_CPP_MIN_LOG_LEVEL'])\n"
)
#: CODE, printing first whether ``import keras_rnnlm.cli`` loaded gensim
GENSIM_AND_CODE = (
    "import sys\n"
    "import keras_rnnlm.cli\n"
    "print('gensim' in sys.modules)\n" + CODE
)


@pytest.fixture(scope="module")
def default_start_up():
    """GENSIM_AND_CODE run as the user runs it, with the default
    environment (one process for the two tests that read it)."""
    return run_as_user(["-c", GENSIM_AND_CODE])


def test_start_up_prints_nothing_on_stderr(default_start_up):
    p = default_start_up
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[1:] == ["4.0", "3"]
    # Without the silencing, this TensorFlow prints oneDNN and CUDA
    # probing lines ("Could not find cuda drivers", "failed call to
    # cuInit") here.
    assert p.stderr.strip() == "", p.stderr


def test_a_user_setting_is_kept():
    p = run_as_user(["-c", CODE], TF_CPP_MIN_LOG_LEVEL="1")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["4.0", "1"]
    assert " port.cc:" not in p.stderr, p.stderr  # INFO is below 1


@pytest.mark.parametrize(
    "argv",
    [
        ["-m", "keras_rnnlm.cli", "train", RECIPE, "--set", "model.cell=foo"],
        [RECIPE, "--set", "model.cell=foo"],
    ],
    ids=["keras-rnnlm", "recipe"],
)
def test_a_user_level_of_3_leaves_a_user_error_one_line(argv):
    """With TF_CPP_MIN_LOG_LEVEL=3 of the user's own, TensorFlow's import
    printed six lines (the absl banner, oneDNN, no CUDA; twice) before
    the one-line error: absl logs them before it is initialised, whatever
    the level."""
    p = run_as_user(argv, TF_CPP_MIN_LOG_LEVEL="3")
    assert p.returncode == 2
    lines = p.stderr.splitlines()
    assert len(lines) == 1, p.stderr
    assert "error: --set model.cell: unknown recurrent layer 'foo'" in lines[0]


BANNER = (
    b"WARNING: All log messages before absl::InitializeLog() is called are "
    b"written to STDERR\n"
)
INFO = b"I0000 00:00:1795790000.288302   17755 port.cc:153] oneDNN is on.\n"
GUARD = (
    b"I0000 00:00:1795790000.401895   17755 cpu_feature_guard.cc:227] "
    b"This TensorFlow binary is optimized\nTo enable AVX2, rebuild.\n"
)
ERROR = b"E0000 00:00:1795790001.5   17755 cuda_dnn.cc:8] cuDNN failed.\n"
OTHER = b"/x/y.py:3: UserWarning: a Python warning\n"


def test_the_filter_keeps_what_the_level_lets_through():
    text = OTHER + BANNER + INFO + GUARD + ERROR + BANNER + INFO
    assert filter_log_lines(text, 0) == text
    assert filter_log_lines(text, 1) == OTHER + BANNER + ERROR
    assert filter_log_lines(text, 2) == OTHER + BANNER + ERROR
    assert filter_log_lines(text, 3) == OTHER
    assert filter_log_lines(BANNER + INFO + BANNER + INFO, 1) == b""


def test_the_cli_does_not_load_gensim(default_start_up):
    # gensim (about half a second) loads only for the commands that use it
    # (word2vec, context-words, IDF weights); context_words imported its
    # stop-word list at module level, so every command and recipe paid it.
    p = default_start_up
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[:1] == ["False"]
