"""Every public layer loads from a ``.keras`` file in a new process that
imported only ``keras_rnnlm``.

Each layer's own checks (config, shapes, weights, training, ``.keras``
round trip in the same process) are in its test file, through
:func:`layer_testing.run_layer_test`.
"""

import keras
import pytest
from layer_testing import package_import_report
from layer_testing import public_layer_classes

from keras_rnnlm.layers.locked_dropout import LockedDropout
from keras_rnnlm.layers.tied_embedding import TiedEmbedding

# Today ``keras_rnnlm/__init__.py`` imports no layer module, so the layers
# are registered only once some code imports ``keras_rnnlm.layers.*``.
ISSUE_24 = pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="issue #24: model.keras does not load after import keras_rnnlm",
)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """One new process: ``import keras_rnnlm``, then load a model."""
    emb = TiedEmbedding(11, 4)
    tokens = keras.Input((None,), dtype="int32")
    out = emb(LockedDropout(0.5)(emb(tokens)), reverse=True)
    path = str(tmp_path_factory.mktemp("public_layers") / "m.keras")
    keras.Model(tokens, out).save(path)
    return package_import_report(path)


@ISSUE_24
@pytest.mark.parametrize("name", sorted(public_layer_classes()))
def test_registered_by_import_keras_rnnlm(name, report):
    registered, _ = report
    assert name in registered, (
        f"{name} is not registered after `import keras_rnnlm` alone"
    )


@ISSUE_24
def test_keras_file_loads_after_import_keras_rnnlm(report):
    _, error = report
    assert error is None, error


def test_public_layers_are_found():
    """The list the tests above run over: the registered layer classes of
    ``keras_rnnlm.layers``."""
    names = public_layer_classes()
    assert {"keras_rnnlm>LSTM", "keras_rnnlm>TiedEmbedding"} <= set(names)
    assert all(n == f"keras_rnnlm>{c.__name__}" for n, c in names.items())
