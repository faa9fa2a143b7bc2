"""Locked (variational) dropout: one mask per sequence, shared over time.

Gal & Ghahramani (2016); used by AWD-LSTM on the embeddings (``dropouti``),
between LSTM layers (``dropouth``), on the last output (``dropout``) and by
MoS/DOC on the mixture latents (``dropoutl``). For inputs of shape
``(batch, time, features)`` a Bernoulli(1 - p) mask of shape
``(batch, 1, features)`` scaled by ``1 / (1 - p)`` is drawn once per call
and multiplied into every time step. Identity at inference.
"""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class LockedDropout(keras.layers.Layer):
    """Dropout whose mask is constant along the time axis.

    Args:
        rate: Float in [0, 1), the drop probability.
        seed: Seed of the ``keras.random.SeedGenerator``.
        **kwargs: Base ``Layer`` arguments.

    Call arguments:
        inputs: ``(batch, time, features)`` (more trailing axes are allowed:
            the mask covers every axis except the time axis 1).
        training: apply the mask.

    Example:

    >>> drop = LockedDropout(0.5, seed=1)
    >>> y = drop(np.ones((2, 4, 3), "float32"), training=True)
    >>> bool((y[:, 0] == y[:, 3]).all())
    True
    """

    def __init__(self, rate, seed=None, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"rate must be in [0, 1), got {rate}")
        self.rate = float(rate)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.supports_masking = True
        self.built = True

    def call(self, inputs, training=False):
        if not training or not self.rate:
            return inputs
        shape = ops.shape(inputs)
        mask_shape = (shape[0], 1, *shape[2:])
        keep = keras.random.uniform(
            mask_shape, seed=self.seed_generator, dtype=inputs.dtype
        )
        keep = ops.cast(keep >= self.rate, inputs.dtype)
        return inputs * keep / (1.0 - self.rate)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "rate": self.rate, "seed": self.seed}
