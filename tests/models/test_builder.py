import dataclasses

import keras
import numpy as np
import pytest
from keras import ops

from keras_rnnlm.config import ConfigError
from keras_rnnlm.config import ModelConfig
from keras_rnnlm.models import build_language_model
from keras_rnnlm.models import copy_weights
from keras_rnnlm.models import recurrent_layer_names
from keras_rnnlm.models import reset_states
from keras_rnnlm.models import validate_model_config


def test_shapes_and_param_count_small():
    cfg = ModelConfig(embedding_dim=200, hidden_sizes=[200, 200])
    model = build_language_model(cfg, 10000, batch_size=20)
    out = model(np.zeros((20, 5), "int32"))
    assert tuple(out.shape) == (20, 5, 10000)
    # Zaremba small: 2M emb + 2 x 320.8K LSTM + 2.01M softmax = 4.65M
    lstm = 4 * (200 * 200 + 200 * 200 + 200)
    expect = 10000 * 200 + 2 * lstm + 200 * 10000 + 10000
    assert model.count_params() == expect


def test_tied_head_shares_embedding():
    cfg = ModelConfig(embedding_dim=8, hidden_sizes=[12, 8], head="tied")
    model = build_language_model(cfg, 50, batch_size=2)
    names = [w.path for w in model.trainable_weights]
    assert not any("decoder" in n for n in names)
    assert model(np.zeros((2, 3), "int32")).shape == (2, 3, 50)


def test_tied_head_size_mismatch_is_config_error():
    cfg = ModelConfig(embedding_dim=8, hidden_sizes=[12, 10], head="tied")
    with pytest.raises(ConfigError, match="embedding_dim"):
        build_language_model(cfg, 50, batch_size=2)


def test_unknown_cell_lists_known():
    """An unknown cell is a ConfigError of the config's validation,
    naming model.cell and the registered layers (not a ValueError of the
    registry when the model is built)."""
    cfg = ModelConfig(cell="nope")
    with pytest.raises(ConfigError) as raised:
        validate_model_config(cfg)
    assert raised.value.key == "model.cell"
    assert str(raised.value).startswith(
        "model.cell: unknown recurrent layer 'nope'; known: "
    )
    assert ", ".join(recurrent_layer_names()) in str(raised.value)
    with pytest.raises(ConfigError, match="model.cell"):
        build_language_model(cfg, 50, batch_size=2)
    assert {"lstm", "gru", "keras_lstm"} <= set(recurrent_layer_names())


@pytest.mark.parametrize(
    "changes, expects",
    [
        ({"cell_kwargs": {"bogus": 1}}, "'bogus' is not an argument of"),
        ({"cell_kwargs": {"units": 5}}, "from model.hidden_sizes"),
        ({"cell_kwargs": {"stateful": False}}, "'stateful' of the 'lstm'"),
        ({"cell_kwargs": {"return_sequences": False}}, "'return_sequences'"),
        ({"cell_kwargs": {"weight_dropout": 0.5}}, "set by model.weight_d"),
        (
            {"weight_dropout": 0.5, "cell_kwargs": {"seed": 3}},
            "'seed' of the 'weight_drop_lstm' layers is set by the builder",
        ),
        (
            {
                "cell": "mmlstm",
                "major_proportions": [0.5],
                "cell_kwargs": {"minor_input": "previous"},
            },
            "from model.minor_input",
        ),
        ({"cell": "mlstm", "cell_kwargs": {"num_cells": 2}}, "'num_cells'"),
        ({"cell": "gru", "cell_kwargs": {"initializer": "zeros"}}, "builder"),
    ],
)
def test_cell_kwargs_are_checked_against_the_constructor(changes, expects):
    """model.cell_kwargs may hold only arguments of the layer's
    constructor that the builder does not set itself: anything else is a
    ConfigError naming model.cell_kwargs when the config is validated,
    not a TypeError or ValueError of Keras when the model is built."""
    cfg = dataclasses.replace(ModelConfig(hidden_sizes=[8]), **changes)
    with pytest.raises(ConfigError) as raised:
        validate_model_config(cfg)
    assert raised.value.key == "model.cell_kwargs"
    assert str(raised.value).startswith("model.cell_kwargs: ")
    assert expects in str(raised.value)


@pytest.mark.parametrize(
    "changes",
    [
        {"cell_kwargs": {"fused": False, "unit_forget_bias": True}},
        {"cell": "gru", "cell_kwargs": {"reset_after": False}},
        {"cell": "mlstm", "cell_kwargs": {"intermediate_size": 4}},
        {"cell": "mgru", "cell_kwargs": {"fused": False}},
        {
            "cell": "multicell_lstm",
            "cell_kwargs": {"num_cells": 2, "strategy": "mean"},
        },
        {
            "cell": "mmlstm",
            "major_proportions": [0.5],
            "cell_kwargs": {"fuse_branches": False},
        },
    ],
)
def test_constructor_arguments_in_cell_kwargs_build(changes):
    """The arguments the check lets through are taken by the layer: the
    multi-cell LSTM's cell arguments and a multiplicative cell's too."""
    cfg = dataclasses.replace(
        ModelConfig(embedding_dim=4, hidden_sizes=[8]), **changes
    )
    validate_model_config(cfg)
    model = build_language_model(cfg, 20, batch_size=2)
    assert model(np.zeros((2, 3), "int32")).shape == (2, 3, 20)


def test_cell_class_accepted():
    cfg = ModelConfig(
        embedding_dim=4, hidden_sizes=[5], cell=keras.layers.GRUCell
    )
    model = build_language_model(cfg, 20, batch_size=2)
    assert model(np.zeros((2, 3), "int32")).shape == (2, 3, 20)


def test_copy_weights_across_batch_sizes_same_predictions():
    cfg = ModelConfig(embedding_dim=8, hidden_sizes=[8, 8])
    a = build_language_model(cfg, 30, batch_size=4, seed=1)
    b = build_language_model(cfg, 30, batch_size=1, seed=2)
    copy_weights(a, b)
    x = np.random.default_rng(0).integers(0, 30, (4, 6)).astype("int32")
    ya = ops.convert_to_numpy(a(x))
    reset_states(b)
    yb = ops.convert_to_numpy(b(x[2:3]))
    np.testing.assert_allclose(ya[2:3], yb, atol=1e-5)


def test_reset_states_and_state_carry():
    cfg = ModelConfig(embedding_dim=8, hidden_sizes=[8])
    model = build_language_model(cfg, 30, batch_size=2, seed=0)
    x = np.ones((2, 4), "int32")
    first = ops.convert_to_numpy(model(x))
    second = ops.convert_to_numpy(model(x))
    assert not np.allclose(first, second)  # state carried
    reset_states(model)
    np.testing.assert_allclose(ops.convert_to_numpy(model(x)), first, 1e-6)


def test_keras_save_load_round_trip(tmp_path):
    cfg = ModelConfig(embedding_dim=8, hidden_sizes=[8], head="tied")
    model = build_language_model(cfg, 30, None, stateful=False, seed=0)
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    x = np.ones((3, 4), "int32")
    np.testing.assert_allclose(
        ops.convert_to_numpy(model(x)), ops.convert_to_numpy(loaded(x)), 1e-6
    )


def test_init_range_uniform():
    cfg = dataclasses.replace(ModelConfig(), init_range=0.05)
    model = build_language_model(cfg, 100, batch_size=2, seed=0)
    for w in model.trainable_weights:
        v = ops.convert_to_numpy(w)
        assert np.abs(v).max() <= 0.05 + 1e-7


@pytest.mark.parametrize("head", ["tied", "softmax"])
def test_sampled_softmax_training_model_and_full_eval_twin(head, tmp_path):
    from keras_rnnlm.models.samplers import has_targets_input
    from keras_rnnlm.models.samplers import set_sampler_counts
    from keras_rnnlm.models.weights import model_parameters

    cfg = ModelConfig(
        embedding_dim=8, hidden_sizes=[8], head=head, sampled_softmax=6
    )
    train = build_language_model(
        cfg, 40, None, stateful=False, seed=0, targets_input=True
    )
    twin = build_language_model(cfg, 40, None, stateful=False, seed=0)
    assert has_targets_input(train) and not has_targets_input(twin)
    assert set_sampler_counts(train, np.arange(40).repeat(3)) == 1
    x = np.random.default_rng(0).integers(0, 40, (3, 5)).astype("int32")
    inputs = {"tokens": x, "targets": x}
    assert tuple(train(inputs, training=True).shape) == (3, 5, 7)
    full = ops.convert_to_numpy(train(inputs))
    assert full.shape == (3, 5, 40)
    # same weights, same names: the training file loads into the twin
    path = str(tmp_path / "w.weights.h5")
    train.save_weights(path)
    twin.load_weights(path)
    np.testing.assert_allclose(
        ops.convert_to_numpy(twin(x)), full, rtol=1e-5, atol=1e-6
    )
    assert len(twin.trainable_weights) == len(train.trainable_weights)
    # without sampling the model has one input and ignores targets_input;
    # the same parameters (the sampler's word counts are not counted)
    plain = dataclasses.replace(cfg, sampled_softmax=0)
    plain_model = build_language_model(plain, 40, None, stateful=False)
    assert not has_targets_input(
        build_language_model(plain, 40, 2, targets_input=True)
    )
    assert model_parameters(train) == plain_model.count_params()


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"head": "mos", "mixture_components": 2}, "single softmax"),
        ({"sampled_softmax": -1}, "int >= 0"),
        ({"sampled_softmax": 2.5}, "int >= 0"),
        ({"sampled_softmax": 4, "sampler_power": -0.5}, "sampler_power"),
    ],
)
def test_sampled_softmax_config_errors(changes, match):
    cfg = ModelConfig(
        embedding_dim=8, hidden_sizes=[8], head="tied", sampled_softmax=4
    )
    with pytest.raises(ConfigError, match=match):
        build_language_model(dataclasses.replace(cfg, **changes), 40, 2)


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"hidden_sizes": []}, "model.hidden_sizes must be a non-empty list"),
        ({"dropout": 1.0}, r"model.dropout must be a number in \[0, 1\)"),
        ({"dropouti": -0.1}, "model.dropouti must be"),
        ({"dropouth": 1.5}, "model.dropouth must be"),
        ({"dropoute": 1.0}, "model.dropoute must be"),
        ({"weight_dropout": 1.0}, "model.weight_dropout must be"),
        ({"dropoutl": 2.0}, "model.dropoutl must be"),
        ({"sampler_power": -0.5}, "model.sampler_power must be a number >= 0"),
        (
            {"cell": "mmlstm", "major_proportions": [1.5]},
            "model.major_proportions must be",
        ),
        (
            {"cell": "mmlstm", "major_proportions": [0.0]},
            "model.major_proportions must be",
        ),
    ],
)
def test_the_config_checks_each_field_before_the_builder(changes, match):
    """A field's own type and range are the config's to check (the builder
    checks only what ties fields together): a value out of range is
    refused when the config is made, naming the field."""
    cfg = ModelConfig(embedding_dim=8, hidden_sizes=[8])
    with pytest.raises(ConfigError, match=match):
        dataclasses.replace(cfg, **changes)


def test_layer_dropouts_rules():
    from keras_rnnlm.models.builder import layer_dropouts

    # None falls back to dropout (dropouti and dropouth alike).
    cfg = ModelConfig(hidden_sizes=[4, 4, 4], dropout=0.4)
    assert layer_dropouts(cfg) == [0.4, 0.4, 0.4, 0.4]
    # dropouth is between layers only: the last layer's output (the head's
    # input) uses dropout.
    cfg = ModelConfig(
        hidden_sizes=[4, 4, 4], dropout=0.4, dropouti=0.65, dropouth=0.3
    )
    assert layer_dropouts(cfg) == [0.65, 0.3, 0.3, 0.4]
    cfg = ModelConfig(hidden_sizes=[4], dropout=0.4, dropouth=0.3)
    assert layer_dropouts(cfg) == [0.4, 0.4]


def test_built_dropouts_follow_layer_dropouts():
    cfg = ModelConfig(
        embedding_dim=4,
        hidden_sizes=[4, 4],
        dropout=0.4,
        dropouti=0.1,
        dropouth=0.25,
        locked_dropout=True,
    )
    model = build_language_model(cfg, 10, None, stateful=False, seed=0)
    rates = {
        layer.name: layer.rate
        for layer in model.layers
        if layer.name.startswith("locked_dropout_")
    }
    assert rates == {
        "locked_dropout_0": 0.1,
        "locked_dropout_1": 0.25,
        "locked_dropout_2": 0.4,
    }


def test_seed_offsets_are_pinned():
    """A seeded run is reproducible only while these stay the same."""
    from keras_rnnlm.models import builder

    assert (
        builder.EMBEDDING_INIT_SEED,
        builder.RECURRENT_INIT_SEED,
        builder.MIXTURE_INIT_SEED,
        builder.DECODER_INIT_SEED,
        builder.DROPOUT_SEED,
        builder.EMBEDDING_DROPOUT_SEED,
        builder.SAMPLER_SEED,
        builder.WEIGHT_DROP_SEED,
        builder.LATENT_DROPOUT_SEED,
    ) == (0, 1, 98, 99, 100, 150, 160, 200, 300)
    cfg = ModelConfig(
        embedding_dim=4,
        hidden_sizes=[4, 4],
        head="tied",
        dropout=0.3,
        dropoute=0.1,
        weight_dropout=0.5,
        sampled_softmax=3,
    )
    model = build_language_model(cfg, 10, None, stateful=False, seed=7)
    layers = {layer.name: layer for layer in model.layers}
    assert layers["dropout_0"].seed == 107
    assert layers["dropout_2"].seed == 109
    assert layers["embedding_dropout"].seed == 157
    assert [layers[f"rnn_{i}"].seed for i in (0, 1)] == [207, 208]
    init = layers["rnn_1"].cell.kernel_initializer
    assert init.seed == 9


def test_outer_recurrent_layers_shared_with_scoring():
    from keras_rnnlm import inference_model
    from keras_rnnlm.models.state import outer_recurrent_layers

    assert inference_model.outer_recurrent_layers is outer_recurrent_layers
    cfg = ModelConfig(
        embedding_dim=6,
        hidden_sizes=[8, 6],
        cell="mmlstm",
        major_proportions=[0.5, 1.0],
    )
    stateless = build_language_model(cfg, 10, None, stateful=False)
    stateful = build_language_model(cfg, 10, 2)
    # Stateful or not, the outer layers only (not the LSTMs inside a
    # MajorMinorLSTM): what reset_states resets and what scoring twins.
    for model in (stateless, stateful):
        found = outer_recurrent_layers(model)
        assert [la.name for la in found] == ["rnn_0", "rnn_1"]
    infer = inference_model.build_inference_model(stateless)
    assert infer.state_names[0].startswith("state_0_")
    assert infer.state_names[-1].startswith("state_1_")


@pytest.mark.parametrize(
    "cell, extra, entries",
    [
        ("lstm", {}, 8 * 32),  # H x 4H of the larger layer
        ("gru", {}, 8 * 24),
        ("mlstm", {}, None),
        ("multicell_lstm", {"cell_kwargs": {"num_cells": 2}}, None),
        # Major and Minor run as two loops on TensorFlow (4 and 4 units in
        # the first layer); the second layer is all Major
        ("mmlstm", {"major_proportions": [0.5, 1.0]}, 6 * 24),
    ],
)
def test_largest_step_entries(cell, extra, entries):
    """The weight entries of the model's largest recurrent step: what
    the Evaluator weighs against the loops' split limit."""
    from keras_rnnlm.models.state import largest_step_entries

    cfg = ModelConfig(embedding_dim=6, hidden_sizes=[8, 6], cell=cell, **extra)
    model = build_language_model(cfg, 10, 2, seed=0)
    if entries is None:  # the cells' own measure of their step
        cells = [model.get_layer(f"rnn_{i}").cell for i in (0, 1)]
        entries = max(
            sum(int(np.prod(w.shape)) for w in c.step_weights()) for c in cells
        )
    assert largest_step_entries(model) == entries
    dense = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4)])
    assert largest_step_entries(dense) == 0


def test_weight_dropped_lstm_comes_from_the_registry():
    from keras_rnnlm.layers.weight_drop_lstm import WeightDropLSTM
    from keras_rnnlm.models.builder import recurrent_layer_name

    cfg = ModelConfig(embedding_dim=4, hidden_sizes=[4], weight_dropout=0.5)
    assert recurrent_layer_name(cfg) == "weight_drop_lstm"
    plain = dataclasses.replace(cfg, weight_dropout=0.0)
    assert recurrent_layer_name(plain) == "lstm"
    model = build_language_model(cfg, 10, 2, seed=0)
    layer = model.get_layer("rnn_0")
    assert isinstance(layer, WeightDropLSTM)
    assert layer.weight_dropout == 0.5
    # the same layer by its registry name
    cfg = dataclasses.replace(cfg, cell="weight_drop_lstm")
    model = build_language_model(cfg, 10, 2, seed=0)
    assert isinstance(model.get_layer("rnn_0"), WeightDropLSTM)


@pytest.mark.parametrize("cell", ["weight_drop_lstm", "mmlstm"])
def test_closed_form_count_of_registry_lstms(cell):
    from keras_rnnlm.models.params import count_params

    cfg = ModelConfig(
        embedding_dim=6,
        hidden_sizes=[8, 6],
        cell=cell,
        head="tied",
        weight_dropout=0.5,
        major_proportions=[0.5, 1.0] if cell == "mmlstm" else None,
    )
    model = build_language_model(cfg, 13, None, stateful=False)
    assert count_params(cfg, 13) == model.count_params()


SEEDED_CELLS = {
    "lstm": {},
    "keras_lstm": {},
    "gru": {"reset_after": False},
    "simple_rnn": {},
    "mrnn": {},
    "mlstm": {"intermediate_size": 5},
    "mgru": {"intermediate_size": 5},
    "tmlstm": {},
    "tmgru": {},
    "multicell_lstm": {},
}


@pytest.mark.parametrize("cell", sorted(SEEDED_CELLS))
def test_seed_fixes_the_default_initializers(cell):
    """``init_range=None`` (the character presets: Keras's default
    initializers): the builder's seed alone gives the weights, whatever
    the process drew from Python's ``random`` before, and the build leaves
    that generator as it found it."""
    import random

    cfg = ModelConfig(
        input_encoding="one_hot",
        hidden_sizes=[6],
        cell=cell,
        cell_kwargs=SEEDED_CELLS[cell],
        init_range=None,
    )

    def weights():
        model = build_language_model(cfg, 7, None, stateful=False, seed=3)
        return [ops.convert_to_numpy(w) for w in model.weights]

    random.seed(11)
    first = weights()
    state = random.getstate()
    second = weights()
    assert random.getstate() == state
    random.seed(12)
    random.random()
    third = weights()
    for a, b, c in zip(first, second, third):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    other = build_language_model(cfg, 7, None, stateful=False, seed=4)
    assert any(
        not np.array_equal(a, ops.convert_to_numpy(w))
        for a, w in zip(first, other.weights)
    )


def test_seed_gives_the_trainers_weights():
    """The trainer seeds the process (``keras.utils.set_random_seed``)
    before it builds: a seeded build gives the weights a run of that seed
    starts from, with or without that call."""
    cfg = ModelConfig(
        input_encoding="one_hot",
        hidden_sizes=[6],
        cell="mlstm",
        cell_kwargs={"intermediate_size": 5},
        init_range=None,
    )
    keras.utils.set_random_seed(5)
    trained = build_language_model(cfg, 7, None, stateful=False, seed=5)
    alone = build_language_model(cfg, 7, None, stateful=False, seed=5)
    for a, b in zip(trained.weights, alone.weights):
        np.testing.assert_array_equal(
            ops.convert_to_numpy(a), ops.convert_to_numpy(b)
        )
