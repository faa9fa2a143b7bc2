import numpy as np
from keras import ops
from layer_testing import run_layer_test

from keras_rnnlm.layers import OneHot


def test_one_hot_rows():
    out = ops.convert_to_numpy(OneHot(4)(np.array([[0, 3], [2, 2]])))
    np.testing.assert_array_equal(out, np.eye(4)[[[0, 3], [2, 2]]])


def test_layer_checks():
    run_layer_test(
        OneHot,
        dict(num_tokens=5),
        np.array([[0, 4, 1], [3, 3, 2]], "int32"),
        expected_output_shape=(None, 3, 5),
        expected_num_trainable_weights=0,
    )
