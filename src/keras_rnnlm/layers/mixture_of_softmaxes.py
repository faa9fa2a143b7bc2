"""Mixture of Softmaxes output head (Yang et al., 2018, "Breaking the
Softmax Bottleneck").

From the (dropped) last recurrent output ``h`` (size ``d``), K experts:

    latent_k = tanh(W_k h + b_k)            (K * latent_dim, one matrix)
    latent   = locked_dropout(latent, p=dropoutl)
    logits_k = latent_k E^T + b_out          (the tied decoder, shared)
    pi       = softmax(W_pi h)               (prior, no bias)
    p(w)     = sum_k pi_k softmax(logits_k)(w)

The mixture is taken in probability space, computed stably in log space:
``log p = logsumexp_k(log pi_k + log_softmax(logits_k))``. The head's
output is the normalised log-probability; since ``log_softmax(log p) =
log p`` it is trained with the package's from-logits cross-entropy.

The decoder is the model's :class:`~keras_rnnlm.layers.TiedEmbedding`
called in reverse on the ``(batch, time, K, latent_dim)`` latent, so this
module has two layers: :class:`MixtureOfSoftmaxes` (latent and prior) and
:class:`MixtureLogProbs` (the mixture of the decoded components).
"""

import keras
from keras import ops

from keras_rnnlm.layers.locked_dropout import LockedDropout
from keras_rnnlm.layers.rows import project_rows
from keras_rnnlm.layers.serialization import serialized_initializers


def mixture_log_probs(component_logits, prior_logits):
    """log sum_k softmax(prior)_k softmax(component_logits_k).

    Args:
        component_logits: ``(..., K, V)``.
        prior_logits: ``(..., K)``.

    Returns:
        ``(..., V)`` normalised log-probabilities.
    """
    component_logits = ops.cast(component_logits, "float32")
    log_p = ops.log_softmax(component_logits, axis=-1)
    log_prior = ops.log_softmax(ops.cast(prior_logits, "float32"), axis=-1)
    return ops.logsumexp(log_p + ops.expand_dims(log_prior, -1), axis=-2)


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class MixtureLogProbs(keras.layers.Layer):
    """``[component_logits (..., K, V), prior_logits (..., K)]`` -> log p.

    See :func:`mixture_log_probs`.
    """

    def call(self, inputs):
        return mixture_log_probs(*inputs)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[0][:-2]) + (input_shape[0][-1],)


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class MixtureOfSoftmaxes(keras.layers.Layer):
    """The MoS expert latents and prior logits from the last output.

    Args:
        num_components: number of experts K (15 in the paper).
        latent_dim: size of each expert's latent (the tied embedding size).
        latent_dropout: locked dropout on the latent (``dropoutl``).
        seed: seed of the dropout.
        kernel_initializer: initializer of both projections.
        bias_initializer: initializer of the latent bias.
        **kwargs: Base ``Layer`` arguments.

    Call arguments:
        inputs: ``(batch, time, d)``, the dropped last recurrent output.
        training: apply the latent dropout.

    Returns:
        ``[latent (batch, time, K, latent_dim), prior_logits (batch, time,
        K)]``; decode the latent with the tied embedding and combine with
        :class:`MixtureLogProbs`.

    Example:

    >>> mos = MixtureOfSoftmaxes(3, 4)
    >>> latent, prior = mos(np.zeros((2, 5, 6), "float32"))
    >>> latent.shape, prior.shape
    ((2, 5, 3, 4), (2, 5, 3))
    """

    def __init__(
        self,
        num_components,
        latent_dim,
        latent_dropout=0.0,
        seed=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_components = int(num_components)
        self.latent_dim = int(latent_dim)
        self.latent_dropout = float(latent_dropout)
        self.seed = seed
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.dropout = LockedDropout(self.latent_dropout, seed=seed)

    def build(self, input_shape):
        d = input_shape[-1]
        k, e = self.num_components, self.latent_dim
        self.latent_kernel = self.add_weight(
            name="latent_kernel",
            shape=(d, k * e),
            initializer=self.kernel_initializer,
        )
        self.latent_bias = self.add_weight(
            name="latent_bias",
            shape=(k * e,),
            initializer=self.bias_initializer,
        )
        self.prior_kernel = self.add_weight(
            name="prior_kernel",
            shape=(d, k),
            initializer=self.kernel_initializer,
        )
        self.built = True

    def call(self, inputs, training=False):
        latent = ops.tanh(
            project_rows(inputs, self.latent_kernel, self.latent_bias)
        )
        latent = self.dropout(latent, training=training)
        shape = ops.shape(inputs)
        latent = ops.reshape(
            latent, (shape[0], shape[1], self.num_components, self.latent_dim)
        )
        prior_logits = ops.matmul(inputs, self.prior_kernel)
        return [latent, prior_logits]

    def compute_output_shape(self, input_shape):
        b, t = input_shape[0], input_shape[1]
        k = self.num_components
        return [(b, t, k, self.latent_dim), (b, t, k)]

    def get_config(self):
        return {
            **super().get_config(),
            "num_components": self.num_components,
            "latent_dim": self.latent_dim,
            "latent_dropout": self.latent_dropout,
            "seed": self.seed,
            **serialized_initializers(
                self, "kernel_initializer", "bias_initializer"
            ),
        }
