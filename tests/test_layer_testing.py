"""The layer-test helper accepts a correct layer and fails on broken ones."""

import keras
import numpy as np
import pytest
from keras import ops
from layer_testing import run_layer_test

TOYS = "layer_testing_toys"


@keras.saving.register_keras_serializable(package=TOYS)
class Toy(keras.layers.Layer):
    """A projection with dropout: one weight, one seed generator."""

    def __init__(self, units, rate=0.5, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.rate = rate
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def build(self, input_shape):
        self.kernel = self.add_weight(
            name="kernel", shape=(input_shape[-1], self.units)
        )

    def call(self, inputs, training=False):
        out = ops.matmul(inputs, self.kernel)
        if training:
            out = keras.random.dropout(out, self.rate, seed=self.seed_generator)
        return out

    def compute_output_shape(self, input_shape):
        return (*input_shape[:-1], self.units)

    def get_config(self):
        return {
            **super().get_config(),
            "units": self.units,
            "rate": self.rate,
            "seed": self.seed,
        }


@keras.saving.register_keras_serializable(package=TOYS)
class DropsAnArgument(Toy):
    def get_config(self):
        config = super().get_config()
        del config["rate"]
        return config


@keras.saving.register_keras_serializable(package=TOYS)
class ForgetsItsWeights(Toy):
    """Saves nothing: a reloaded model keeps its fresh initial weights."""

    def save_own_variables(self, store):
        pass

    def load_own_variables(self, store):
        pass


@keras.saving.register_keras_serializable(package=TOYS)
class NoisyInference(Toy):
    def call(self, inputs, training=False):
        return super().call(inputs, training=True)


@keras.saving.register_keras_serializable(package=TOYS)
class ConfigNotUsed(Toy):
    """``from_config`` loses the rate: the clone's training output differs."""

    @classmethod
    def from_config(cls, config):
        clone = super().from_config(config)
        clone.rate = 0.9
        return clone

    def get_config(self):
        return {**super().get_config(), "rate": 0.5}


class Unregistered(Toy):
    pass


GOOD = dict(
    init_kwargs=dict(units=3, rate=0.5, seed=1),
    input_shape=(2, 5, 4),
    expected_output_shape=(None, 5, 3),
    expected_num_trainable_weights=1,
    expected_num_non_trainable_weights=0,
    expected_num_seed_generators=1,
    training_changes_output=True,
    package=TOYS,
)


def _run(layer_cls, **changes):
    kwargs = {**GOOD, **changes}
    return run_layer_test(layer_cls, kwargs.pop("init_kwargs"), **kwargs)


def test_a_correct_layer_passes():
    layer = _run(Toy)
    assert isinstance(layer, Toy) and layer.built


def test_input_data_and_several_outputs():
    """Keras's own LSTM (not registered; ``use_cudnn`` is not in its
    config) with its states returned."""
    x = np.random.default_rng(0).normal(size=(2, 3, 4)).astype("float32")
    run_layer_test(
        keras.layers.LSTM,
        dict(units=2, return_state=True),
        x,
        expected_output_shape=[(None, 2)] * 3,
        expected_num_trainable_weights=3,
        expected_num_seed_generators=1,  # its cell's, for dropout
        run_training_check=False,
        package=None,
        config_exclude=("use_cudnn",),
    )
    with pytest.raises(AssertionError, match="lacks .*use_cudnn"):
        run_layer_test(keras.layers.LSTM, dict(units=2), x, package=None)


@pytest.mark.parametrize(
    "layer_cls, changes, match",
    [
        (DropsAnArgument, {}, r"lacks constructor arguments \['rate'\]"),
        (ForgetsItsWeights, {}, "reloaded"),
        (NoisyInference, {}, "two inference calls differ"),
        (ConfigNotUsed, {}, "clone: training"),
        (Unregistered, {}, "not registered"),
        (Toy, {"expected_num_trainable_weights": 2}, "1 trainable_weights"),
        (Toy, {"expected_num_seed_generators": 0}, "1 seed_generators"),
        (Toy, {"expected_output_shape": (None, 5, 4)}, "output shapes"),
        (Toy, {"training_changes_output": False}, "are different"),
        (Toy, {"expected_num_losses": 1}, "0 losses in training"),
        (Toy, {"supports_masking": True}, "supports_masking"),
    ],
)
def test_a_broken_layer_or_a_wrong_expectation_fails(layer_cls, changes, match):
    with pytest.raises(AssertionError, match=match):
        _run(layer_cls, run_training_check=False, **changes)


def test_the_training_step_must_change_the_weights():
    """A layer whose weight gets a zero gradient fails the training check."""

    @keras.saving.register_keras_serializable(package=TOYS)
    class Detached(Toy):
        def call(self, inputs, training=False):
            return ops.matmul(inputs, 0.0 * self.kernel)

    with pytest.raises(AssertionError, match="changed nothing"):
        _run(Detached, training_changes_output=False, run_saving_check=False)
