import keras
import numpy as np
import pytest
from keras import ops
from layer_testing import numpy_lstm
from layer_testing import run_layer_test

from keras_rnnlm.layers.weight_drop_lstm import WeightDropLSTM


def _layer(p=0.5):
    layer = WeightDropLSTM(6, weight_dropout=p, seed=3, return_sequences=True)
    layer.build((3, 9, 5))
    return layer


def _kernels(layer):
    k, rk, b = (w.astype("float64") for w in layer.get_weights()[:3])
    return k, rk, b


def test_one_mask_per_call_shared_by_all_steps_and_sequences(monkeypatch):
    layer = _layer()
    # The fused path is kept: the generic per-step loop is never used.
    monkeypatch.setattr(
        layer, "generic_inner_loop", lambda *a, **k: pytest.fail("slow")
    )
    x = np.random.default_rng(0).normal(size=(3, 9, 5)).astype("float32")
    state = ops.convert_to_numpy(layer.weight_drop_seed_generator.state)
    out = ops.convert_to_numpy(layer(x, training=True))
    # Replay the same draw: one dropped kernel explains every time step of
    # every sequence of the call.
    layer.weight_drop_seed_generator.state.assign(state)
    dropped = ops.convert_to_numpy(layer.recurrent_kernel_for_call(True))
    k, rk, b = _kernels(layer)
    ratio = dropped / rk
    assert np.all(np.isclose(ratio, 0) | np.isclose(ratio, 2.0))  # 1/(1-p)
    assert 0.3 < (ratio == 0).mean() < 0.7
    expect, _, _ = numpy_lstm(x.astype("float64"), k, dropped, b)
    np.testing.assert_allclose(out, expect, atol=1e-5)


def test_new_mask_each_call_and_raw_weights_kept():
    layer = _layer()
    raw = ops.convert_to_numpy(layer.cell.recurrent_kernel).copy()
    m1 = ops.convert_to_numpy(layer.recurrent_kernel_for_call(True)) == 0
    m2 = ops.convert_to_numpy(layer.recurrent_kernel_for_call(True)) == 0
    assert (m1 != m2).any()
    np.testing.assert_array_equal(
        ops.convert_to_numpy(layer.cell.recurrent_kernel), raw
    )


def test_inference_uses_raw_kernel():
    layer = _layer()
    x = np.random.default_rng(1).normal(size=(3, 9, 5)).astype("float32")
    out = ops.convert_to_numpy(layer(x, training=False))
    k, rk, b = _kernels(layer)
    np.testing.assert_allclose(
        out, numpy_lstm(x.astype("float64"), k, rk, b)[0], atol=1e-5
    )


def test_gradient_flows_through_mask_to_raw_kernel():
    layer = _layer()
    x = np.random.default_rng(2).normal(size=(3, 9, 5)).astype("float32")
    if keras.backend.backend() != "tensorflow":
        pytest.skip("gradient check written for TensorFlow")
    import tensorflow as tf

    state = ops.convert_to_numpy(layer.weight_drop_seed_generator.state)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(layer(x, training=True))
    grad = tape.gradient(loss, layer.cell.recurrent_kernel.value)
    layer.weight_drop_seed_generator.state.assign(state)
    dropped = ops.convert_to_numpy(layer.recurrent_kernel_for_call(True))
    grad = ops.convert_to_numpy(grad)
    assert np.all(grad[dropped == 0] == 0)
    assert np.any(grad[dropped != 0] != 0)


@pytest.mark.parametrize("stateful", [False, True])
def test_layer_checks(stateful):
    """Training draws a new kernel mask (the clone, with the same seed
    state, draws the same one)."""
    run_layer_test(
        WeightDropLSTM,
        dict(
            units=4,
            weight_dropout=0.3,
            seed=7,
            return_state=True,
            stateful=stateful,
        ),
        input_shape=(2, 5, 3),
        expected_output_shape=[(2 if stateful else None, 4)] * 3,
        expected_num_trainable_weights=3,
        expected_num_seed_generators=2,  # the mask's and the Keras cell's
        expected_num_non_trainable_variables=4 if stateful else 2,
        training_changes_output=True,
    )


def test_validation():
    with pytest.raises(ValueError):
        WeightDropLSTM(4, weight_dropout=1.0)
    with pytest.raises(ValueError):
        WeightDropLSTM(4, weight_dropout=0.5, fused=False)
