import keras
import numpy as np
import pytest
from graphs_ran import forward_nodes
from graphs_ran import training_step_nodes
from keras import ops
from layer_testing import gradients
from layer_testing import numpy_lstm
from layer_testing import run_layer_test

from keras_rnnlm.layers import LSTM


def _pair(units=6, **kw):
    fast = LSTM(units, return_sequences=True, return_state=True, **kw)
    ref = keras.layers.LSTM(
        units, return_sequences=True, return_state=True, **kw
    )
    fast.build((3, 7, 5))
    ref.build((3, 7, 5))
    ref.set_weights(fast.get_weights())
    return fast, ref


def test_matches_numpy_reference():
    x = np.random.default_rng(0).normal(size=(3, 7, 5)).astype("float32")
    fast, _ = _pair()
    out, h, c = fast(x)
    k, rk, b = (w.astype("float64") for w in fast.get_weights())
    ref_out, ref_h, ref_c = numpy_lstm(x.astype("float64"), k, rk, b)
    np.testing.assert_allclose(ops.convert_to_numpy(out), ref_out, atol=1e-5)
    np.testing.assert_allclose(ops.convert_to_numpy(h), ref_h, atol=1e-5)
    np.testing.assert_allclose(ops.convert_to_numpy(c), ref_c, atol=1e-5)


def test_gradients_match_keras_lstm():
    x = np.random.default_rng(1).normal(size=(3, 7, 5)).astype("float32")
    fast, ref = _pair()
    for g_fast, g_ref in zip(gradients(fast, x), gradients(ref, x)):
        np.testing.assert_allclose(g_fast, g_ref, atol=2e-5, rtol=1e-4)


def test_fallback_path_equal():
    x = np.random.default_rng(2).normal(size=(3, 7, 5)).astype("float32")
    fast, _ = _pair()
    slow = LSTM(6, return_sequences=True, return_state=True, fused=False)
    slow.build((3, 7, 5))
    slow.set_weights(fast.get_weights())
    for a, b in zip(fast(x), slow(x)):
        np.testing.assert_allclose(
            ops.convert_to_numpy(a), ops.convert_to_numpy(b), atol=1e-6
        )


def test_stateful_carries_state():
    x = np.random.default_rng(3).normal(size=(2, 6, 4)).astype("float32")
    layer = LSTM(5, return_sequences=True, stateful=True)
    whole = keras.layers.LSTM(5, return_sequences=True)
    layer.build((2, 6, 4))
    whole.build((2, 6, 4))
    whole.set_weights(layer.get_weights())
    halves = np.concatenate(
        [
            ops.convert_to_numpy(layer(x[:, :3])),
            ops.convert_to_numpy(layer(x[:, 3:])),
        ],
        axis=1,
    )
    np.testing.assert_allclose(
        halves, ops.convert_to_numpy(whole(x)), atol=1e-6
    )
    layer.reset_state()
    np.testing.assert_allclose(
        ops.convert_to_numpy(layer(x[:, :3])), halves[:, :3], atol=1e-6
    )


@pytest.mark.parametrize(
    "kw, shapes, states",
    [
        (
            dict(fused=True, return_sequences=True, return_state=True),
            [(None, 5, 4)],
            0,
        ),
        (dict(fused=False, return_state=True), [(None, 4)], 0),
        (dict(stateful=True, return_sequences=True), [(2, 5, 4)], 2),
    ],
)
def test_layer_checks(kw, shapes, states):
    """Fused (``fused=True`` is kept in the config), generic, stateless and
    stateful (the carried states are tracked non-trainable variables, not
    weights)."""
    if kw.get("return_state"):
        shapes = shapes + [(None, 4)] * 2
    run_layer_test(
        LSTM,
        dict(units=4, **kw),
        input_shape=(2, 5, 3),
        expected_output_shape=shapes,
        expected_num_trainable_weights=3,
        expected_num_seed_generators=1,  # the Keras cell's (dropout)
        expected_num_non_trainable_variables=1 + states,
    )


def test_bad_fused_value():
    with pytest.raises(ValueError, match="fused"):
        LSTM(4, fused="yes")


TF_ONLY = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="the graph TensorFlow runs",
)


@TF_ONLY
def test_input_projection_is_one_product_with_its_bias():
    """In a training step as TensorFlow ran it, the layer's hoisted input
    product adds its bias inside the matrix product (no separate pass
    over the (time, batch, 4 x units) projection)."""
    nodes = training_step_nodes()
    forward = {
        n.op for n in nodes if "/rnn_0" in n.name and "gradient" not in n.name
    }
    assert any("FusedMatMul" in op for op in forward), forward
    assert not {"BiasAdd", "AddV2", "Add"} & forward, forward


@TF_ONLY
def test_stacked_layers_hand_over_time_major():
    """The fast path runs time-major from the layer's input on: in a
    forward pass of two stacked layers as TensorFlow ran it, only the
    stack's input and its output are transposed (the first layer's
    output transpose and the second's input transpose cancel), and no
    projection is transposed."""
    nodes = forward_nodes(hidden_sizes=[4, 4])
    transposes = [n.name for n in nodes if "Transpose" in n.op]
    assert len(transposes) == 2, transposes
