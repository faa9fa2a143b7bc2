import numpy as np
from keras import ops
from layer_testing import run_layer_test

from keras_rnnlm.layers.activation_regularization import (
    ActivationRegularization,
)


def test_ar_tar_hand_computed():
    # dropped: (1, 3, 2); raw: (1, 3, 2)
    dropped = np.array([[[1.0, 2.0], [0.0, 1.0], [3.0, 0.0]]], "float32")
    raw = np.array([[[1.0, 1.0], [2.0, 3.0], [2.0, 1.0]]], "float32")
    # AR = mean(dropped^2) = (1+4+0+1+9+0)/6 = 15/6
    # TAR: diffs [[1,2],[0,-2]] -> mean of squares = (1+4+0+4)/4 = 9/4
    reg = ActivationRegularization(alpha=2.0, beta=1.0)
    out = reg([dropped, raw], training=True)
    np.testing.assert_array_equal(ops.convert_to_numpy(out), dropped)
    assert np.isclose(float(reg.ar), 15 / 6)
    assert np.isclose(float(reg.tar), 9 / 4)
    assert len(reg.losses) == 1
    assert np.isclose(float(reg.losses[0]), 2 * 15 / 6 + 9 / 4)


def test_tar_of_a_one_step_window_is_zero_not_nan():
    """The last variable-BPTT window of an epoch can be one token long."""
    reg = ActivationRegularization(alpha=2.0, beta=1.0)
    h = np.full((2, 1, 3), 2.0, "float32")
    reg([h, h], training=True)
    assert float(reg.tar) == 0.0
    assert np.isclose(float(reg.losses[0]), 2 * 4.0)


def test_no_loss_at_inference():
    reg = ActivationRegularization(alpha=2.0, beta=1.0)
    h = np.ones((2, 3, 4), "float32")
    reg([h, h], training=False)
    assert not reg.losses


def test_layer_checks():
    """Identity in training too; one loss; ``ar`` and ``tar`` are
    non-trainable weights (saved)."""
    h = np.random.default_rng(0).normal(size=(2, 3, 4)).astype("float32")
    run_layer_test(
        ActivationRegularization,
        dict(alpha=2.0, beta=1.0),
        [h, 2 * h],
        expected_output_shape=(None, 3, 4),
        expected_num_trainable_weights=0,
        expected_num_non_trainable_weights=2,
        expected_num_losses=1,
    )
