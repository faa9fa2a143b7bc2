"""A fixed per-feature mask: the layer behind feature masking at test time
(:mod:`keras_rnnlm.analysis.feature_masking`), inserted after each
recurrent layer of an evaluation model."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class FeatureMask(keras.layers.Layer):
    """Multiplies its input by a fixed per-feature mask.

    The mask is a non-trainable variable of shape ``(features,)``, all
    ones after building (the identity); :meth:`set_mask` replaces it. It
    broadcasts over batch and time: one mask for the whole input.
    """

    def build(self, input_shape):
        self.mask = self.add_weight(
            name="mask",
            shape=(input_shape[-1],),
            initializer="ones",
            trainable=False,
        )
        self.built = True

    @property
    def size(self):
        return int(self.mask.shape[0])

    def call(self, inputs):
        return inputs * ops.cast(self.mask, inputs.dtype)

    def set_mask(self, mask):
        self.mask.assign(ops.cast(ops.reshape(mask, (-1,)), self.mask.dtype))

    def clear(self):
        """Back to the identity (all ones)."""
        self.mask.assign(ops.ones((self.size,), self.mask.dtype))

    def compute_output_shape(self, input_shape):
        return input_shape
