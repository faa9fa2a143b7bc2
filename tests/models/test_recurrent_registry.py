import dataclasses

import keras
import numpy as np
import pytest

from keras_rnnlm.config import ModelConfig
from keras_rnnlm.layers.major_minor_lstm import MajorMinorLSTM
from keras_rnnlm.layers.weight_drop_lstm import WeightDropLSTM
from keras_rnnlm.models import build_language_model
from keras_rnnlm.models import make_recurrent_layer
from keras_rnnlm.models import recurrent_layer_names
from keras_rnnlm.models.builder import recurrent_layer_name
from keras_rnnlm.models.initializers import with_initializer


def test_names_list_every_layer_the_builder_makes():
    names = set(recurrent_layer_names())
    assert {"lstm", "weight_drop_lstm", "mmlstm", "multicell_lstm"} <= names
    assert {"keras_lstm", "gru", "simple_rnn", "mlstm"} <= names
    base = ModelConfig(hidden_sizes=[4, 4])
    configs = [
        base,
        dataclasses.replace(base, weight_dropout=0.5),
        dataclasses.replace(base, cell="mmlstm", major_proportions=[1, 1]),
        dataclasses.replace(base, cell="mlstm"),
    ]
    for cfg in configs:
        assert recurrent_layer_name(cfg) in names


def test_weight_drop_lstm_by_name():
    init = keras.initializers.Constant(0.01)
    layer = make_recurrent_layer(
        "weight_drop_lstm",
        3,
        stateful=False,
        initializer=init,
        name="w",
        weight_dropout=0.4,
        seed=5,
    )
    assert isinstance(layer, WeightDropLSTM)
    assert (layer.weight_dropout, layer.seed, layer.name) == (0.4, 5, "w")
    assert layer.return_sequences and not layer.stateful
    assert layer.cell.unit_forget_bias is False
    out = layer(np.ones((2, 4, 2), "float32"))
    assert tuple(out.shape) == (2, 4, 3)
    for w in layer.weights:
        np.testing.assert_allclose(keras.ops.convert_to_numpy(w), 0.01)


def test_mmlstm_by_name():
    layer = make_recurrent_layer(
        "mmlstm",
        6,
        stateful=False,
        major_proportion=0.5,
        minor_input="previous",
        weight_dropout=0.3,
        seed=1,
    )
    assert isinstance(layer, MajorMinorLSTM)
    out = layer(np.ones((2, 4, 5), "float32"))
    assert tuple(out.shape) == (2, 4, 6)


def test_with_initializer_one_rule():
    init = keras.initializers.Constant(0.5)
    assert with_initializer({"a": 1}, None, lstm=True) == {"a": 1}
    kw = with_initializer({}, init, lstm=True)
    assert kw == {
        "kernel_initializer": init,
        "recurrent_initializer": init,
        "bias_initializer": init,
        "unit_forget_bias": False,
    }
    # an argument of the layer's own wins over the model-wide initializer
    kw = with_initializer(
        {"bias_initializer": "zeros", "unit_forget_bias": True},
        init,
        lstm=True,
        weights=("intermediate_initializer",),
    )
    assert kw["bias_initializer"] == "zeros" and kw["unit_forget_bias"]
    assert kw["intermediate_initializer"] is init
    assert "unit_forget_bias" not in with_initializer({}, init)


@pytest.mark.parametrize(
    "cell", ["lstm", "keras_lstm", "gru", "multicell_lstm", "mlstm"]
)
def test_init_range_reaches_every_recurrent_weight(cell):
    cfg = ModelConfig(
        embedding_dim=4, hidden_sizes=[5], cell=cell, init_range=0.01
    )
    model = build_language_model(cfg, 10, 2, seed=0)
    layer = model.get_layer("rnn_0")
    assert layer.trainable_weights
    for w in layer.trainable_weights:
        assert np.abs(keras.ops.convert_to_numpy(w)).max() <= 0.01 + 1e-7


def test_every_layer_lists_its_constructor_arguments():
    """Each registered layer's extra arguments are read from its
    constructors: never what the factory or builder sets, and each one
    is taken by the layer."""
    from keras_rnnlm.models.recurrent_registry import SET_BY_BUILDER
    from keras_rnnlm.models.recurrent_registry import recurrent_layer_arguments

    for name in recurrent_layer_names():
        arguments = recurrent_layer_arguments(name)
        assert arguments, name
        assert not arguments & {*SET_BY_BUILDER, "return_sequences", "cell"}
        assert {"dtype", "trainable"} <= arguments
    assert {"num_cells", "strategy", "fused"} <= recurrent_layer_arguments(
        "multicell_lstm"
    )
    assert "intermediate_size" in recurrent_layer_arguments("mlstm")
    assert "weight_dropout" in recurrent_layer_arguments("weight_drop_lstm")
    assert "weight_dropout" not in recurrent_layer_arguments("lstm")
    layer = make_recurrent_layer(
        "multicell_lstm",
        4,
        stateful=False,
        dtype="float32",
        trainable=False,
        num_cells=2,
        fused=False,
    )
    assert layer.num_cells == 2 and not layer.trainable
