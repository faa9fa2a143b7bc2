"""TensorFlow's C++ start-up lines are silenced unless the user set
``TF_CPP_MIN_LOG_LEVEL``."""

from user_process import run_as_user

CODE = (
    "import os\n"
    "import keras_rnnlm.cli\n"
    "import tensorflow as tf\n"
    "print(float(tf.reduce_sum(tf.ones((2, 2)))))\n"
    "print(os.environ['TF_CPP_MIN_LOG_LEVEL'])\n"
)


def test_start_up_prints_nothing_on_stderr():
    p = run_as_user(["-c", CODE])
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["4.0", "3"]
    # Without the silencing, this TensorFlow prints oneDNN and CUDA
    # probing lines ("Could not find cuda drivers", "failed call to
    # cuInit") here.
    assert p.stderr.strip() == "", p.stderr


def test_a_user_setting_is_kept():
    p = run_as_user(["-c", CODE], TF_CPP_MIN_LOG_LEVEL="1")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["4.0", "1"]


def test_the_cli_does_not_load_gensim():
    # gensim (about half a second) loads only for the commands that use it
    # (word2vec, context-words, IDF weights); context_words imported its
    # stop-word list at module level, so every command and recipe paid it.
    p = run_as_user(
        ["-c", "import sys, keras_rnnlm.cli; print('gensim' in sys.modules)"]
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["False"]
