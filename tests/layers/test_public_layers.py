"""Every public layer loads from a ``.keras`` file in a new process that
imported only ``keras_rnnlm``.

Each layer's own checks (config, shapes, weights, training, ``.keras``
round trip in the same process) are in its test file, through
:func:`layer_testing.run_layer_test`.
"""

import subprocess
import sys

import keras
import pytest
from layer_testing import public_layer_classes
from layer_testing import registered_after_package_import

from keras_rnnlm.layers.locked_dropout import LockedDropout
from keras_rnnlm.layers.tied_embedding import TiedEmbedding

# Today ``keras_rnnlm/__init__.py`` imports no layer module, so the layers
# are registered only once some code imports ``keras_rnnlm.layers.*``.
ISSUE_24 = pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="issue #24: model.keras does not load after import keras_rnnlm",
)


@ISSUE_24
@pytest.mark.parametrize("name", sorted(public_layer_classes()))
def test_registered_by_import_keras_rnnlm(name):
    assert name in registered_after_package_import(), (
        f"{name} is not registered after `import keras_rnnlm` alone"
    )


@ISSUE_24
def test_keras_file_loads_after_import_keras_rnnlm(tmp_path):
    emb = TiedEmbedding(11, 4)
    tokens = keras.Input((None,), dtype="int32")
    out = emb(LockedDropout(0.5)(emb(tokens)), reverse=True)
    path = str(tmp_path / "m.keras")
    keras.Model(tokens, out).save(path)
    code = (
        "import sys, keras, keras_rnnlm\n"
        "model = keras.saving.load_model(sys.argv[1])\n"
        "print(model([[1, 2, 3]]).shape)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, path],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "(1, 3, 11)" in proc.stdout


def test_public_layers_are_found():
    """The list the test above runs over (all registered layer classes of
    ``keras_rnnlm.layers``)."""
    names = public_layer_classes()
    assert {"keras_rnnlm>LSTM", "keras_rnnlm>TiedEmbedding"} <= set(names)
    assert all(n == f"keras_rnnlm>{c.__name__}" for n, c in names.items())
