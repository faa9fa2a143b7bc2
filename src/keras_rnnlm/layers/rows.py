"""The vocabulary-sized layers, as TensorFlow's CPU kernels run them best.

A language model's embedding table and output projection are its largest
weights (vocabulary x features), and in a small model they take most of a
training step. Two details of how Keras's layers reach TensorFlow's
kernels cost a full pass over such a matrix each step:

* ``keras.layers.Embedding`` reads the whole table before it gathers its
  rows. Once a sparse update (SGD on the rows a batch used) has touched
  the table, TensorFlow copies the whole variable on every such read, to
  keep readers and in-place row updates apart. :class:`Embedding` gathers
  the rows from the variable itself on TensorFlow (``ResourceGather``):
  the same rows, the same gradient, no copy (:func:`gather_rows`, which
  the tied embedding's sampled candidates and the CBOW context's table
  read through too).
* ``keras.layers.Dense`` on ``(batch, time, features)`` inputs runs a
  ``tensordot`` (reshape, product, reshape), and its bias is then added in
  a separate pass over the ``(batch, time, vocabulary)`` logits, which
  TensorFlow's graph optimizer cannot fuse across the reshape.
  :func:`over_rows` applies a product to the flattened ``(tokens,
  features)`` rows, so the bias is fused into the product (oneDNN's
  matrix product with a bias). :class:`Dense` is Keras's dense layer
  called so (the builder's output layer),
  :class:`~keras_rnnlm.layers.TiedEmbedding` decodes so, and every
  layer's ``x @ W + b`` over a sequence (the recurrent layers' input
  projections, the mixture heads' latent ones) is :func:`project_rows`.

Both give the numbers the Keras layers give (tested to round-off) on
every backend; the weights, their names and the saved configuration's
arguments are Keras's. The classes keep Keras's class names, so a
weights file stores their variables where Keras's layers store them
(``layers/dense/vars/0``: its path is named after the class) and the
weights of runs saved with Keras's layers load unchanged. On JAX the
compiled step fuses either form itself.
"""

import keras
from keras import ops


def over_rows(inputs, product):
    """``product`` of ``inputs`` (``(..., features)``) applied to their rows
    flattened to ``(tokens, features)``, its result reshaped back to
    ``(..., outputs)``."""
    if len(inputs.shape) <= 2:
        return product(inputs)
    lead = ops.shape(inputs)[:-1]
    out = product(ops.reshape(inputs, (-1, inputs.shape[-1])))
    return ops.reshape(out, (*lead, out.shape[-1]))


def project_rows(inputs, kernel, bias=None):
    """``inputs @ kernel (+ bias)`` for ``(..., features)`` inputs, over
    their flattened rows (:func:`over_rows`): on TensorFlow the bias is
    fused into the product. The input projections of the recurrent
    layers and the mixture heads' latent projections run through it."""

    def product(rows):
        out = ops.matmul(rows, kernel)
        return out if bias is None else out + bias

    return over_rows(inputs, product)


def gather_rows(table, ids):
    """Rows ``ids`` of ``table`` (a ``keras.Variable`` or a tensor). On
    TensorFlow a variable's rows are read from the variable itself (no
    read of the whole table first; see the module docstring)."""
    if keras.backend.backend() == "tensorflow" and isinstance(
        table, keras.Variable
    ):
        import tensorflow as tf  # TensorFlow backend only

        return tf.gather(table.value, ids)
    return ops.take(table, ids, axis=0)


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class Embedding(keras.layers.Embedding):
    """``keras.layers.Embedding`` that reads only the rows it looks up
    (:func:`gather_rows`). Same arguments, weights and results.

    Example:

    >>> emb = Embedding(100, 8)
    >>> emb(np.array([[1, 2, 3]])).shape
    (1, 3, 8)
    """

    def call(self, inputs):
        if self.lora_enabled or self.quantization_mode is not None:
            return super().call(inputs)
        if inputs.dtype not in ("int32", "int64"):
            inputs = ops.cast(inputs, "int32")
        rows = gather_rows(self._embeddings, inputs)
        return ops.cast(rows, self.compute_dtype)


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class Dense(keras.layers.Dense):
    """``keras.layers.Dense`` over the flattened rows of its inputs
    (:func:`over_rows`): the bias fused into the product on TensorFlow.
    Same arguments, weights and results.

    Example:

    >>> dense = Dense(50)
    >>> dense(np.ones((2, 3, 4), "float32")).shape
    (2, 3, 50)
    """

    def call(self, inputs, training=None):
        if self.lora_enabled or self.quantization_mode is not None:
            return super().call(inputs, training=training)
        return over_rows(
            inputs, lambda rows: super(Dense, self).call(rows, training)
        )
