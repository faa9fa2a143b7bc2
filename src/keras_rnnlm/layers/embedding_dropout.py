"""Embedding dropout: whole word types dropped for a batch.

Gal & Ghahramani (2016), AWD-LSTM ``dropoute``: a (vocab, 1) Bernoulli
(1 - p) mask, scaled by ``1 / (1 - p)``, multiplies the rows of the
embedding matrix, once per batch; every occurrence of a dropped word in the
batch gets a zero vector. Implemented without touching the matrix: the
looked-up vectors are multiplied by ``mask[token]``, which is the same
function and the same gradient (a dropped row receives none) at the cost of
a (vocab,) mask instead of a (vocab, dim) product.
"""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class EmbeddingDropout(keras.layers.Layer):
    """Drops whole word types from an embedding lookup.

    Args:
        vocab_size: number of token types (rows of the embedding matrix).
        rate: Float in [0, 1), probability of dropping a word type.
        seed: Seed of the ``keras.random.SeedGenerator``.
        **kwargs: Base ``Layer`` arguments.

    Call arguments:
        inputs: ``[tokens, embedded]`` with int tokens ``(batch, time)`` and
            their embeddings ``(batch, time, dim)``.
        training: apply the mask.

    Example:

    >>> drop = EmbeddingDropout(10, 0.5, seed=0)
    >>> tokens = np.array([[1, 1, 2]])
    >>> y = drop([tokens, np.ones((1, 3, 4), "float32")], training=True)
    >>> bool((y[0, 0] == y[0, 1]).all())
    True
    """

    def __init__(self, vocab_size, rate, seed=None, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"rate must be in [0, 1), got {rate}")
        self.vocab_size = int(vocab_size)
        self.rate = float(rate)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.built = True

    def row_mask(self, dtype="float32"):
        """A fresh (vocab,) mask: 0 or 1 / (1 - rate)."""
        u = keras.random.uniform(
            (self.vocab_size,), seed=self.seed_generator, dtype=dtype
        )
        return ops.cast(u >= self.rate, dtype) / (1.0 - self.rate)

    def call(self, inputs, training=False):
        tokens, embedded = inputs
        if not training or not self.rate:
            return embedded
        mask = self.row_mask(embedded.dtype)
        scale = ops.take(mask, ops.cast(tokens, "int32"), axis=0)
        return embedded * ops.expand_dims(scale, -1)

    def compute_output_shape(self, input_shape):
        return input_shape[1]

    def get_config(self):
        return {
            **super().get_config(),
            "vocab_size": self.vocab_size,
            "rate": self.rate,
            "seed": self.seed,
        }
