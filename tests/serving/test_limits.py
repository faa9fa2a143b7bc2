"""keras_rnnlm.serving.limits: the server's limits, importable without
TensorFlow so that the CLI runs on a Keras-on-JAX install."""

import dataclasses
import os

import pytest

from keras_rnnlm.serving.limits import WARMUP_SECONDS
from keras_rnnlm.serving.limits import Limits
from tests.user_process import REPO
from tests.user_process import run_without_tensorflow


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
    ["recipes/cbow_wt2.py", "src/keras_rnnlm/cli/__main__.py"],
)
def test_recipes_and_the_cli_start_without_tensorflow(tmp_path, script):
    # Before serving.limits, the CLI's `serve` options imported the
    # request parser and with it TensorFlow: every recipe died with
    # ModuleNotFoundError on a JAX-only install.
    proc = run_without_tensorflow(
        [os.path.join(REPO, script), "--help"], tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "usage:" in proc.stdout
