import keras
import numpy as np
import pytest
from keras import ops
from layer_testing import assert_windows_equal_whole
from layer_testing import numpy_lstm
from layer_testing import run_layer_test

from keras_rnnlm.config import ConfigError
from keras_rnnlm.config import ModelConfig
from keras_rnnlm.inference_model import build_inference_model
from keras_rnnlm.layers.major_minor_lstm import MajorMinorLSTM
from keras_rnnlm.layers.major_minor_lstm import count_params
from keras_rnnlm.layers.major_minor_lstm import split_units
from keras_rnnlm.layers.weight_drop_lstm import WeightDropLSTM
from keras_rnnlm.models import build_language_model
from keras_rnnlm.models import copy_weights
from keras_rnnlm.models import reset_states
from keras_rnnlm.models.state import outer_recurrent_layers

B, T, D, E = 3, 7, 5, 4  # batch, time, previous-layer size, embedding size


def _branch_weights(branch, recurrent_kernel=None):
    k, rk, b = (w.astype("float64") for w in branch.get_weights())
    if recurrent_kernel is not None:
        rk = ops.convert_to_numpy(recurrent_kernel).astype("float64")
    return k, rk, b


def _inputs(seed=0, time=T):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(B, time, D)).astype("float32")
    emb = rng.normal(size=(B, time, E)).astype("float32")
    return x, emb


def _layer(units=10, r=0.7, minor_input="embedding", **kw):
    kw.setdefault("return_sequences", True)
    layer = MajorMinorLSTM(
        units, major_proportion=r, minor_input=minor_input, seed=3, **kw
    )
    x, emb = _inputs()
    layer([x, emb] if minor_input == "embedding" else x)
    return layer


def test_split_units_rounds_half_up():
    assert split_units(1080, 0.9) == (972, 108)
    assert split_units(620, 0.6) == (372, 248)
    assert split_units(1150, 0.5) == (575, 575)
    assert split_units(256, 0.9) == (230, 26)  # 230.4
    assert split_units(1440, 0.7) == (1008, 432)  # 1007.9999...
    assert split_units(5, 0.5) == (3, 2)  # half up, not to even
    assert split_units(400, 1.0) == (400, 0)


@pytest.mark.parametrize("minor_input", ["embedding", "previous"])
def test_branch_shapes_and_parameter_count(minor_input):
    layer = _layer(minor_input=minor_input)
    assert (layer.major.units, layer.minor.units) == (7, 3)
    minor_in = E if minor_input == "embedding" else D
    k, rk, _ = layer.major.get_weights()
    assert k.shape == (D, 28) and rk.shape == (7, 28)
    k, rk, _ = layer.minor.get_weights()
    assert k.shape == (minor_in, 12) and rk.shape == (3, 12)
    assert layer.count_params() == count_params(10, 0.7, D, minor_in)
    # Block-diagonal recurrence: fewer weights than one LSTM of 10.
    assert layer.count_params() < count_params(10, 1.0, D)


@pytest.mark.parametrize("fuse", [False, True])
@pytest.mark.parametrize("minor_input", ["embedding", "previous"])
def test_matches_numpy(minor_input, fuse):
    """Output = [Major LSTM(previous), Minor LSTM(embeddings or
    previous)], each an independent float64 LSTM (two loops or one fused
    block-diagonal loop)."""
    layer = _layer(
        minor_input=minor_input, weight_dropout=0.5, fuse_branches=fuse
    )
    x, emb = _inputs(1)
    args = [x, emb] if minor_input == "embedding" else x
    out = ops.convert_to_numpy(layer(args, training=False))
    major, *_ = numpy_lstm(x, *_branch_weights(layer.major))
    minor_x = emb if minor_input == "embedding" else x
    minor, *_ = numpy_lstm(minor_x, *_branch_weights(layer.minor))
    np.testing.assert_allclose(
        out, np.concatenate([major, minor], -1), atol=1e-5
    )


@pytest.mark.parametrize("fuse", [False, True])
def test_training_drops_both_recurrent_kernels_with_own_masks(fuse):
    layer = _layer(weight_dropout=0.5, fuse_branches=fuse)
    x, emb = _inputs(2)
    saved = [
        ops.convert_to_numpy(b.weight_drop_seed_generator.state)
        for b in layer.branches
    ]
    out = ops.convert_to_numpy(layer([x, emb], training=True))
    dropped = []
    for branch, state in zip(layer.branches, saved):
        branch.weight_drop_seed_generator.state.assign(state)
        dropped.append(branch.recurrent_kernel_for_call(True))
    major, *_ = numpy_lstm(x, *_branch_weights(layer.major, dropped[0]))
    minor, *_ = numpy_lstm(emb, *_branch_weights(layer.minor, dropped[1]))
    np.testing.assert_allclose(
        out, np.concatenate([major, minor], -1), atol=1e-5
    )
    for branch, kernel in zip(layer.branches, dropped):
        assert branch.weight_dropout == 0.5
        assert 0.3 < (ops.convert_to_numpy(kernel) == 0).mean() < 0.7


def test_proportion_one_is_exactly_a_weight_drop_lstm():
    """r = 1: no Minor branch; same weights (and seed) -> same outputs as
    WeightDropLSTM, at inference and in training (same mask)."""
    x, emb = _inputs(3)
    mm = MajorMinorLSTM(
        6,
        major_proportion=1.0,
        minor_input="previous",
        weight_dropout=0.5,
        seed=11,
        return_sequences=True,
        return_state=True,
    )
    ref = WeightDropLSTM(
        6,
        weight_dropout=0.5,
        seed=11,
        return_sequences=True,
        return_state=True,
    )
    mm(x)
    ref(x)
    assert mm.minor is None and mm.minor_units == 0
    assert mm.state_size == [6, 6]
    ref.set_weights(mm.get_weights())
    assert mm.count_params() == ref.count_params()
    for training in (False, True, True):
        got = [ops.convert_to_numpy(t) for t in mm(x, training=training)]
        want = [ops.convert_to_numpy(t) for t in ref(x, training=training)]
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
    # With minor_input="embedding" the (absent) Minor input is ignored.
    emb_layer = MajorMinorLSTM(6, 1.0, return_sequences=True)
    emb_layer([x, emb])
    emb_layer.set_weights(mm.get_weights())
    np.testing.assert_array_equal(
        ops.convert_to_numpy(emb_layer([x, emb])),
        ops.convert_to_numpy(ref(x)[0]),
    )


@pytest.mark.parametrize("fuse", [False, True])
def test_state_in_and_out(fuse):
    """return_state gives [h_major, c_major, h_minor, c_minor]; feeding
    them back continues the sequence exactly."""
    layer = _layer(return_state=True, fuse_branches=fuse)
    x, emb = _inputs(4, time=8)
    whole, *final = layer([x, emb])
    assert [tuple(s.shape) for s in final] == [(B, 7), (B, 7), (B, 3), (B, 3)]
    first, *states = layer([x[:, :3], emb[:, :3]])
    second, *end = layer([x[:, 3:], emb[:, 3:]], initial_state=states)
    np.testing.assert_allclose(
        np.concatenate([first, second], 1), whole, atol=1e-5
    )
    for a, b in zip(end, final):
        np.testing.assert_allclose(a, b, atol=1e-5)
    major, h, c = numpy_lstm(x, *_branch_weights(layer.major))
    np.testing.assert_allclose(final[0], h, atol=1e-5)
    np.testing.assert_allclose(final[1], c, atol=1e-5)
    zeros = layer.get_initial_state(2)
    assert [tuple(z.shape) for z in zeros] == [(2, 7), (2, 7), (2, 3), (2, 3)]


@pytest.mark.parametrize("fuse", [False, True])
def test_stateful_carries_both_branches_and_resets(fuse):
    layer = _layer(stateful=True, fuse_branches=fuse)
    ref = _layer(stateful=False, fuse_branches=not fuse)
    ref.set_weights(layer.get_weights())
    x, emb = _inputs(5, time=8)
    layer.reset_state()
    halves = [
        ops.convert_to_numpy(layer([x[:, s : s + 4], emb[:, s : s + 4]]))
        for s in (0, 4)
    ]
    whole = ops.convert_to_numpy(ref([x, emb]))
    np.testing.assert_allclose(np.concatenate(halves, 1), whole, atol=1e-5)
    assert len(layer.states) == 4
    assert all(np.abs(ops.convert_to_numpy(v)).sum() > 0 for v in layer.states)
    # The states are tracked (threaded through compiled steps) but are not
    # weights (count_params, saved weights).
    paths = [v.path for v in layer.non_trainable_variables]
    assert sum("rnn_state" in p for p in paths) == 4
    assert not any("rnn_state" in w.path for w in layer.weights)
    layer.reset_state()
    assert all(not ops.convert_to_numpy(v).any() for v in layer.states)


@pytest.mark.parametrize(
    "kw, shapes",
    [
        (
            dict(units=9, major_proportion=0.7, return_state=True),
            [(None, T, 9), (None, 6), (None, 6), (None, 3), (None, 3)],
        ),
        (
            dict(units=9, major_proportion=1.0, minor_input="previous"),
            [(None, T, 9)],
        ),
        (
            dict(
                units=12,
                major_proportion=0.6,
                minor_input="previous",
                stateful=True,
                fuse_branches=True,
                kernel_initializer=keras.initializers.RandomUniform(
                    -0.2, 0.2, seed=1
                ),
                unit_forget_bias=False,
            ),
            [(B, T, 12)],
        ),
    ],
)
def test_layer_checks(kw, shapes):
    """Both branches (two weight-dropped LSTMs), the Major one alone (r =
    1: its input is the previous layer only), stateful and fused."""
    branches = 1 if kw["major_proportion"] == 1.0 else 2
    states = 2 * branches if kw.get("stateful") else 0
    x, emb = _inputs()
    run_layer_test(
        MajorMinorLSTM,
        dict(kw, weight_dropout=0.25, seed=5, return_sequences=True),
        x if kw.get("minor_input") == "previous" else [x, emb],
        expected_output_shape=shapes,
        expected_num_trainable_weights=3 * branches,
        expected_num_seed_generators=2 * branches,  # as WeightDropLSTM's
        expected_num_non_trainable_variables=2 * branches + states,
        training_changes_output=True,
    )


def test_validation():
    with pytest.raises(ValueError, match="major_proportion"):
        MajorMinorLSTM(8, major_proportion=0.0)
    with pytest.raises(ValueError, match="major_proportion"):
        MajorMinorLSTM(8, major_proportion=1.5)
    with pytest.raises(ValueError, match="minor_input"):
        MajorMinorLSTM(8, minor_input="input")
    with pytest.raises(ValueError, match="weight_dropout"):
        MajorMinorLSTM(8, weight_dropout=1.0)
    x, emb = _inputs()
    with pytest.raises(ValueError, match="embeddings"):
        MajorMinorLSTM(8)(x)
    with pytest.raises(ValueError, match="one tensor"):
        MajorMinorLSTM(8, minor_input="previous")([x, emb])


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="uses tf.GradientTape"
)
@pytest.mark.parametrize("return_sequences", [True, False])
def test_fused_branches_same_outputs_and_gradients(return_sequences):
    """One block-diagonal loop == two loops: outputs, final states and the
    gradients of every weight, the inputs and the initial states, with
    weight drop on (same seeds, so the same masks)."""
    import tensorflow as tf

    x, emb = _inputs(6, time=9)
    layers = []
    for fuse in (False, True):
        layer = _layer(
            weight_dropout=0.4,
            return_state=True,
            return_sequences=return_sequences,
            fuse_branches=fuse,
        )
        layers.append(layer)
    layers[1].set_weights(layers[0].get_weights())
    rng = np.random.default_rng(7)
    init = [rng.normal(size=(B, n)).astype("float32") for n in (7, 7, 3, 3)]
    results = []
    for layer in layers:
        xs = [tf.constant(x), tf.constant(emb)] + [tf.constant(s) for s in init]
        with tf.GradientTape() as tape:
            tape.watch(xs)
            out, *final = layer(xs[:2], initial_state=xs[2:], training=True)
            loss = tf.reduce_sum(out * out) + sum(
                tf.reduce_sum(f * (k + 1.0)) for k, f in enumerate(final)
            )
        grads = tape.gradient(loss, [*layer.trainable_weights, *xs])
        results.append([out, *final, *grads])
    assert not layers[0]._fused(x) and layers[1]._fused(x)
    for a, b in zip(*results):
        np.testing.assert_allclose(
            ops.convert_to_numpy(a), ops.convert_to_numpy(b), atol=2e-5
        )


def test_stateful_keeps_final_state_after_explicit_initial_state():
    """As keras.layers.RNN: fused or not, a stateful layer called with
    explicit initial states keeps the final state."""
    x, emb = _inputs(8, time=4)
    rng = np.random.default_rng(9)
    init = [rng.normal(size=(B, n)).astype("float32") for n in (7, 7, 3, 3)]
    kept, weights = [], None
    for fuse in (False, True):
        layer = _layer(stateful=True, return_state=True, fuse_branches=fuse)
        if weights is None:
            weights = layer.get_weights()
        layer.set_weights(weights)
        _, *final = layer([x, emb], initial_state=init)
        kept.append([ops.convert_to_numpy(v) for v in layer.states])
        for v, f in zip(kept[-1], final):
            np.testing.assert_allclose(v, ops.convert_to_numpy(f), atol=1e-6)
    for a, b in zip(*kept):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_fuse_branches_validation_and_auto():
    with pytest.raises(ValueError, match="fuse_branches"):
        MajorMinorLSTM(8, fuse_branches="yes")
    layer = _layer()
    assert layer._fused(None) == (keras.backend.backend() == "jax")
    # nothing to fuse without a Minor branch
    assert not _layer(r=1.0, fuse_branches=True)._fused(None)


def test_equal_branches_start_different():
    """A seeded initializer is re-seeded for the Minor branch, so equal
    shapes (5:5, same input) never start with equal weights."""
    init = keras.initializers.RandomUniform(-0.1, 0.1, seed=7)
    layer = MajorMinorLSTM(
        8,
        0.5,
        minor_input="previous",
        kernel_initializer=init,
        recurrent_initializer=init,
        bias_initializer=init,
    )
    layer(_inputs()[0])
    for a, b in zip(layer.major.get_weights(), layer.minor.get_weights()):
        assert a.shape == b.shape and not np.allclose(a, b)


# -- in the builder ----------------------------------------------------------


def _cfg(**kw):
    base = dict(
        embedding_dim=6,
        hidden_sizes=[10, 6],
        cell="mmlstm",
        major_proportions=[0.7, 0.5],
        head="mos",
        mixture_components=3,
        weight_dropout=0.3,
        locked_dropout=True,
        dropout=0.2,
        dropouti=0.3,
        init_range=0.5,
        rnn_init=None,
    )
    base.update(kw)
    return ModelConfig(**base)


def _source(tensor):
    return tensor._keras_history.operation.name


@pytest.mark.parametrize("minor_input", ["embedding", "previous"])
def test_builder_wires_minor_input(minor_input):
    model = build_language_model(
        _cfg(minor_input=minor_input), 20, None, stateful=False, seed=0
    )
    sources = []
    for i in range(2):
        node = model.get_layer(f"rnn_{i}")._inbound_nodes[0]
        sources.append([_source(t) for t in node.input_tensors])
    if minor_input == "embedding":
        # The Minor LSTMs read the embeddings after dropouti (the first
        # layer's own input).
        assert sources == [
            ["locked_dropout_0", "locked_dropout_0"],
            ["locked_dropout_1", "locked_dropout_0"],
        ]
    else:
        assert sources == [["locked_dropout_0"], ["locked_dropout_1"]]
    minor_in = 6 if minor_input == "embedding" else 10
    tied = 20 * 6 + 20  # embedding + decoder bias
    mos = 6 * 3 * 6 + 3 * 6 + 6 * 3  # latent + prior
    layers = count_params(10, 0.7, 6, 6) + count_params(6, 0.5, 10, minor_in)
    expect = tied + layers + mos
    n = sum(int(np.prod(v.shape)) for v in model.trainable_variables)
    assert n == expect


@pytest.mark.parametrize("minor_input", ["embedding", "previous"])
def test_builder_carries_state(minor_input):
    """Window-by-window predictions of the stateful model (compiled
    predict step) equal one pass of the stateless model, on every backend;
    so does streaming through the stateless inference graph."""
    cfg = _cfg(minor_input=minor_input)
    model = build_language_model(cfg, 20, 2, seed=0)
    whole = build_language_model(cfg, 20, None, stateful=False, seed=0)
    copy_weights(model, whole)
    names = [la.name for la in outer_recurrent_layers(model)]
    assert names == ["rnn_0", "rnn_1"]
    ids = np.random.default_rng(0).integers(0, 20, (2, 12)).astype("int32")
    ref = assert_windows_equal_whole(model, whole, ids, 4)
    reset_states(model)
    for layer in outer_recurrent_layers(model):
        assert not any(ops.convert_to_numpy(v).any() for v in layer.states)
    infer = build_inference_model(whole)
    assert infer.state_shapes == [(7,), (7,), (3,), (3,)] + [(3,)] * 4
    states, chunks = infer.initial_states(2), []
    for s in range(0, 12, 3):
        logits, states = infer(ids[:, s : s + 3], states)
        chunks.append(ops.convert_to_numpy(logits))
    np.testing.assert_allclose(np.concatenate(chunks, 1), ref, atol=1e-5)


def test_builder_proportions_one_equal_weight_dropped_lstm_model():
    mm = _cfg(major_proportions=[1.0, 1.0], head="tied", hidden_sizes=[8, 6])
    lstm = _cfg(head="tied", hidden_sizes=[8, 6], cell="lstm")
    lstm.major_proportions = None
    a = build_language_model(mm, 20, None, stateful=False, seed=0)
    b = build_language_model(lstm, 20, None, stateful=False, seed=0)
    assert a.count_params() == b.count_params()
    copy_weights(a, b)
    ids = np.random.default_rng(1).integers(0, 20, (2, 9)).astype("int32")
    np.testing.assert_array_equal(
        ops.convert_to_numpy(a(ids)), ops.convert_to_numpy(b(ids))
    )


def test_builder_pytorch_init_is_per_branch():
    """rnn_init='pytorch': each branch ~ U(+-1/sqrt(its own units))."""
    cfg = _cfg(
        rnn_init="pytorch", hidden_sizes=[200, 6], major_proportions=[0.9, 1]
    )
    model = build_language_model(cfg, 20, None, stateful=False, seed=0)
    layer = model.get_layer("rnn_0")
    for branch, units in ((layer.major, 180), (layer.minor, 20)):
        for w in branch.get_weights():
            limit = 1 / np.sqrt(units)
            assert np.abs(w).max() <= limit
            assert np.abs(w).max() > 0.9 * limit


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(major_proportions=None), "major_proportions"),
        (dict(major_proportions=[0.9]), "major_proportions"),
        (dict(major_proportions=[0.9, 0.0]), r"\(0, 1\]"),
        (dict(major_proportions=[0.9, 1.2]), r"\(0, 1\]"),
        (dict(minor_input="input"), "minor_input"),
        (dict(cell="gru", weight_dropout=0.0), "mmlstm"),
    ],
)
def test_builder_validation(kw, match):
    with pytest.raises(ConfigError, match=match):
        build_language_model(_cfg(**kw), 20, None, stateful=False)
