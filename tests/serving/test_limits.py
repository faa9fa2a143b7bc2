"""keras_rnnlm.serving.limits: the server's limits, importable without
TensorFlow so that the CLI runs on a Keras-on-JAX install."""

import dataclasses
import os
import textwrap

import pytest

from keras_rnnlm.serving.limits import WARMUP_SECONDS
from keras_rnnlm.serving.limits import Limits
from tests.user_process import run_as_user

REPO = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))

# Runs ARGV[1:] as a script with every `import tensorflow` failing, as on
# the lent GPU machine (Keras on JAX, no TensorFlow wheel).
WITHOUT_TF = textwrap.dedent(
    """
    import runpy, sys

    class NoTensorFlow:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("tensorflow", "tensorflow_text"):
                raise ImportError(f"No module named {name!r} (blocked)")

    sys.meta_path.insert(0, NoTensorFlow())
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")
    """
)


def test_defaults_are_the_documented_ones():
    limits = Limits()
    assert limits.max_body_bytes == 4 * 1024 * 1024
    assert limits.max_rows == 1024
    assert limits.max_sentence_tokens == 1024
    assert limits.request_timeout_s == 30.0
    assert WARMUP_SECONDS == 60.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        limits.max_rows = 1


def test_the_serving_package_reexports_the_same_limits():
    from keras_rnnlm.serving import Limits as exported

    assert exported is Limits


@pytest.mark.parametrize(
    "script",
    ["recipes/cbow_wt2.py", "keras_rnnlm/cli/__main__.py"],
)
def test_recipes_and_the_cli_start_without_tensorflow(tmp_path, script):
    # Before serving.limits, the CLI's `serve` options imported the
    # request parser and with it TensorFlow: every recipe died with
    # ModuleNotFoundError on a JAX-only install.
    runner = tmp_path / "without_tf.py"
    runner.write_text(WITHOUT_TF)
    proc = run_as_user(
        [str(runner), os.path.join(REPO, script), "--help"],
        KERAS_BACKEND="jax",
        PYTHONPATH=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "usage:" in proc.stdout
