"""keras_rnnlm.export.tensorflow_only: export and serving need TensorFlow;
without it they say so in one line."""

import keras
import pytest

from keras_rnnlm.config import ConfigError
from keras_rnnlm.export import tensorflow_only
from tests.user_process import run_without_tensorflow


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="TensorFlow backend"
)
def test_returns_tensorflow_on_its_backend():
    import tensorflow as tf

    assert tensorflow_only.require_tensorflow("export") is tf


def test_another_backend_is_a_config_error(monkeypatch):
    monkeypatch.setattr(tensorflow_only.keras.backend, "backend", lambda: "jax")
    with pytest.raises(ConfigError, match="SavedModel export needs the "):
        tensorflow_only.require_tensorflow("SavedModel export")


@pytest.mark.parametrize("command", ["export", "serve"])
def test_without_tensorflow_the_cli_prints_one_line(
    tmp_path, tiny_run, command
):
    # Before require_tensorflow: export raised a RuntimeError and serve an
    # ImportError, both with a traceback.
    if command == "export":
        args = ["export", tiny_run, str(tmp_path / "1")]
    else:
        (tmp_path / "models").mkdir()
        args = ["serve", str(tmp_path / "models"), "--model-name", "lm"]
    proc = run_without_tensorflow(["-m", "keras_rnnlm.cli", *args], tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [x for x in proc.stderr.splitlines() if "error" in x]
    assert lines == [
        f"keras-rnnlm {command}: error: "
        + ("SavedModel export" if command == "export" else "keras-rnnlm serve")
        + " needs the TensorFlow backend, and Keras runs on 'jax': set "
        "KERAS_BACKEND=tensorflow"
    ], proc.stderr
    assert "Traceback" not in proc.stderr
