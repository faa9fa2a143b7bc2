import numpy as np
import pytest
from keras import ops
from layer_testing import run_layer_test

from keras_rnnlm.layers.locked_dropout import LockedDropout


def test_mask_shape_batch_1_features_and_scaling():
    drop = LockedDropout(0.4, seed=0)
    x = np.ones((5, 7, 30), "float32")
    y = ops.convert_to_numpy(drop(x, training=True))
    # Same mask at every time step, differing across sequences/features.
    np.testing.assert_array_equal(y, np.broadcast_to(y[:, :1], y.shape))
    assert np.all(np.isclose(y, 0) | np.isclose(y, 1 / 0.6))
    assert (y[:, 0] == 0).any() and (y[:, 0] != 0).any()
    assert not np.array_equal(y[0, 0], y[1, 0])


def test_inference_is_identity_and_new_mask_per_call():
    drop = LockedDropout(0.5, seed=1)
    x = np.random.default_rng(0).normal(size=(2, 4, 16)).astype("float32")
    np.testing.assert_array_equal(ops.convert_to_numpy(drop(x)), x)
    a = ops.convert_to_numpy(drop(x, training=True))
    b = ops.convert_to_numpy(drop(x, training=True))
    assert not np.array_equal(a == 0, b == 0)


def test_layer_checks():
    run_layer_test(
        LockedDropout,
        dict(rate=0.25, seed=3),
        input_shape=(2, 3, 4),
        expected_output_shape=(None, 3, 4),
        expected_num_trainable_weights=0,
        expected_num_seed_generators=1,
        supports_masking=True,
        training_changes_output=True,
    )


def test_rate_check():
    with pytest.raises(ValueError):
        LockedDropout(1.0)
