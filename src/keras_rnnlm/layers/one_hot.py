"""One-hot token encoding: the input of the character-level models."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class OneHot(keras.layers.Layer):
    """Maps int token ids (batch, time) to one-hot vectors (..., vocab).

    Equivalent to an embedding whose table is the identity matrix, with no
    parameters; the first recurrent layer's input kernel then plays the
    role of the embedding (as in the character-level models of Krause et
    al. 2016 and Maupomé & Meurs 2019).

    Args:
        num_tokens: size of the vocabulary (alphabet).
        **kwargs: base ``Layer`` arguments.

    Example:

    >>> OneHot(4)(np.array([[0, 3]])).shape
    (1, 2, 4)
    """

    def __init__(self, num_tokens, **kwargs):
        super().__init__(**kwargs)
        self.num_tokens = int(num_tokens)
        self.built = True

    def call(self, inputs):
        return ops.one_hot(
            ops.cast(inputs, "int32"), self.num_tokens, dtype=self.compute_dtype
        )

    def compute_output_shape(self, input_shape):
        return (*input_shape, self.num_tokens)

    def get_config(self):
        config = super().get_config()
        config["num_tokens"] = self.num_tokens
        return config
