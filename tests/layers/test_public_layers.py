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


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """One new process: ``import keras_rnnlm``, then load a model."""
    emb = TiedEmbedding(11, 4)
    tokens = keras.Input((None,), dtype="int32")
    out = emb(LockedDropout(0.5)(emb(tokens)), reverse=True)
    path = str(tmp_path_factory.mktemp("public_layers") / "m.keras")
    keras.Model(tokens, out).save(path)
    return package_import_report(path)


@pytest.mark.parametrize("name", sorted(public_layer_classes()))
def test_registered_by_import_keras_rnnlm(name, report):
    registered, _ = report
    assert name in registered, (
        f"{name} is not registered after `import keras_rnnlm` alone"
    )


def test_keras_file_loads_after_import_keras_rnnlm(report):
    _, error = report
    assert error is None, error


def test_public_layers_are_found():
    """The list the tests above run over: the registered layer classes of
    ``keras_rnnlm.layers``."""
    names = public_layer_classes()
    assert {"keras_rnnlm>LSTM", "keras_rnnlm>TiedEmbedding"} <= set(names)
    assert all(n == f"keras_rnnlm>{c.__name__}" for n, c in names.items())


def test_a_run_model_loads_after_import_keras_rnnlm(tmp_path):
    """A run's ``model.keras`` (the stateless model of the builder, here a
    weight-dropped LSTM stack under a mixture-of-softmaxes head) loads in
    a new process after ``import keras_rnnlm`` alone."""
    from keras_rnnlm.config import ModelConfig
    from keras_rnnlm.models import build_language_model

    config = ModelConfig(
        embedding_dim=8,
        hidden_sizes=[8, 8],
        weight_dropout=0.2,
        head="mos",
        mixture_components=2,
        locked_dropout=True,
    )
    path = str(tmp_path / "model.keras")
    build_language_model(config, 13, None, stateful=False).save(path)
    _, error = package_import_report(path)
    assert error is None, error
