"""Direct Output Connection head (Takase, Suzuki & Nagata, 2018, "Direct
Output Connection for a High-Rank Language Model").

A generalisation of Mixture of Softmaxes: the J = sum_n i_n mixture
components come from several layers, ``i_n`` of them from source ``n``
(source 0 = the embedding output after ``dropouti``, source n = the n-th
LSTM's output after its dropout; the last source is the final layer after
``dropout``):

    k_{j} = tanh(W_j h^n + b_j)       (one matrix per source; tanh as in
                                       the reference code, Eq. 11 has none)
    K     = locked_dropout(concat_n k, p=dropoutl)   (ONE mask over all J)
    pi    = softmax(W_pi h^N)          (prior from the final layer only)
    p(w)  = sum_j pi_j softmax(k_j E^T + b_out)(w)

Coefficient-of-variation penalty (Eq. 12-13), **as the reference code
computes it** (nttcslab-nlp/doc_lm ``main.py``)::

    B  = sum over time of pi          -> (batch, J)   (NOT over the batch)
    cv = sqrt(var_unbiased(all batch*J entries of B) * (J - 1)) / mean(B)
    loss += lambda_beta * cv ** 2

How it differs from the textbook ``std(B) / avg(B)`` of Eq. 13 with B
summed over the whole mini-batch (a J-vector): (1) B is kept per sequence
and the variance is pooled over batch and components; (2) the variance is
the unbiased one (divided by ``batch*J - 1``) and is multiplied by
``J - 1``, so cv^2 is ``(J - 1)`` times the pooled relative variance. We
compute ``cv ** 2`` directly as ``var * (J - 1) / mean ** 2`` (the same
value, without the square root whose gradient is infinite at 0). The last
training batch's ``cv`` is kept in the non-trainable variable ``cv`` for
logging (DOC Table 4 reports ``sqrt(beta)``).
"""

import keras
from keras import ops

from keras_rnnlm.layers.locked_dropout import LockedDropout
from keras_rnnlm.layers.rows import project_rows
from keras_rnnlm.layers.serialization import serialized_initializers


def coefficient_of_variation_squared(prior):
    """The DOC reference code's cv^2 of the prior ``(batch, time, J)``."""
    prior = ops.cast(prior, "float32")
    j = prior.shape[-1]
    prior_sum = ops.sum(prior, axis=1)  # (batch, J)
    flat = ops.reshape(prior_sum, (-1,))
    n = ops.cast(ops.shape(flat)[0], "float32")
    mean = ops.mean(flat)
    var = ops.sum(ops.square(flat - mean)) / (n - 1.0)
    return var * (j - 1) / ops.square(mean)


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class DirectOutputConnection(keras.layers.Layer):
    """DOC mixture latents (from several layers) and prior logits.

    Args:
        components: list ``[i_0, i_1, ..., i_N]``, the number of components
            taken from each source passed at call time (0: none). DOC's
            best PTB setting with 3 LSTMs: ``[0, 0, 5, 15]``.
        latent_dim: size of each component (the tied embedding size).
        latent_dropout: the ONE locked dropout over all components
            (``dropoutl``, 0.6).
        cv_penalty: ``lambda_beta`` of the coefficient-of-variation
            penalty (0.001); 0 disables it.
        seed: seed of the dropout.
        kernel_initializer: initializer of the projections and the prior.
        bias_initializer: initializer of the projection biases.
        **kwargs: Base ``Layer`` arguments.

    Call arguments:
        inputs: list of the ``N + 1`` sources ``(batch, time, d_n)``; the
            last one is the final layer (the prior's input).
        training: dropout and the CV penalty.

    Returns:
        ``[latent (batch, time, J, latent_dim), prior_logits (batch, time,
        J)]``, for the tied decoder and
        :class:`~keras_rnnlm.layers.mixture_of_softmaxes.MixtureLogProbs`.

    Example:

    >>> doc = DirectOutputConnection([0, 2, 3], 4)
    >>> srcs = [np.zeros((2, 5, d), "float32") for d in (4, 6, 7)]
    >>> latent, prior = doc(srcs)
    >>> latent.shape, prior.shape
    ((2, 5, 5, 4), (2, 5, 5))
    """

    def __init__(
        self,
        components,
        latent_dim,
        latent_dropout=0.0,
        cv_penalty=0.0,
        seed=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.components = [int(i) for i in components]
        if not self.components or sum(self.components) < 1:
            raise ValueError(f"components needs a positive entry: {components}")
        self.latent_dim = int(latent_dim)
        self.latent_dropout = float(latent_dropout)
        self.cv_penalty = float(cv_penalty)
        self.seed = seed
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.dropout = LockedDropout(self.latent_dropout, seed=seed)
        self.cv = self.add_weight(
            name="cv", shape=(), initializer="zeros", trainable=False
        )

    @property
    def num_components(self):
        return sum(self.components)

    def build(self, input_shape):
        if len(input_shape) != len(self.components):
            raise ValueError(
                f"{len(self.components)} sources expected (components="
                f"{self.components}), got {len(input_shape)}"
            )
        self.kernels, self.biases = [], []
        for n, (shape, i_n) in enumerate(zip(input_shape, self.components)):
            if not i_n:
                self.kernels.append(None)
                self.biases.append(None)
                continue
            self.kernels.append(
                self.add_weight(
                    name=f"kernel_{n}",
                    shape=(shape[-1], i_n * self.latent_dim),
                    initializer=self.kernel_initializer,
                )
            )
            self.biases.append(
                self.add_weight(
                    name=f"bias_{n}",
                    shape=(i_n * self.latent_dim,),
                    initializer=self.bias_initializer,
                )
            )
        self.prior_kernel = self.add_weight(
            name="prior_kernel",
            shape=(input_shape[-1][-1], self.num_components),
            initializer=self.kernel_initializer,
        )
        self.built = True

    def call(self, inputs, training=False):
        parts = [
            ops.tanh(project_rows(x, k, b))
            for x, k, b in zip(inputs, self.kernels, self.biases)
            if k is not None
        ]
        latent = parts[0] if len(parts) == 1 else ops.concatenate(parts, -1)
        latent = self.dropout(latent, training=training)
        shape = ops.shape(inputs[-1])
        latent = ops.reshape(
            latent, (shape[0], shape[1], self.num_components, self.latent_dim)
        )
        prior_logits = ops.matmul(inputs[-1], self.prior_kernel)
        if training and self.cv_penalty:
            cv2 = coefficient_of_variation_squared(
                ops.softmax(ops.cast(prior_logits, "float32"), axis=-1)
            )
            self.cv.assign(ops.sqrt(cv2))
            self.add_loss(self.cv_penalty * cv2)
        return [latent, prior_logits]

    def compute_output_shape(self, input_shape):
        b, t = input_shape[-1][0], input_shape[-1][1]
        j = self.num_components
        return [(b, t, j, self.latent_dim), (b, t, j)]

    def get_config(self):
        return {
            **super().get_config(),
            "components": self.components,
            "latent_dim": self.latent_dim,
            "latent_dropout": self.latent_dropout,
            "cv_penalty": self.cv_penalty,
            "seed": self.seed,
            **serialized_initializers(
                self, "kernel_initializer", "bias_initializer"
            ),
        }
