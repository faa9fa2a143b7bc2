"""Embedding whose transpose is also the output layer (weight tying).

Press & Wolf (2017), Inan et al. (2017); used by AWD-LSTM, MoS and DOC:
``logits = h E^T + b`` with ``E`` the (vocab, dim) embedding matrix and a
separate output bias ``b`` (initialised to zero).
"""

import copy

import keras
from keras import ops

from keras_rnnlm.layers.rows import Embedding
from keras_rnnlm.layers.rows import gather_rows
from keras_rnnlm.layers.rows import over_rows
from keras_rnnlm.layers.sampled_softmax import UnigramSampler
from keras_rnnlm.layers.sampled_softmax import sampled_logits


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class TiedEmbedding(Embedding):
    """An ``Embedding`` that can also be called in reverse as the decoder.

    Called the usual way it looks token ids up; called with ``reverse=True``
    on features of size ``output_dim`` it returns vocabulary logits
    ``features @ embeddings^T + output_bias``. The same layer object is
    called twice in the functional graph, so the matrix is shared and saved
    once.

    Args:
        input_dim: vocabulary size.
        output_dim: embedding size (the size of the features fed back in
            reverse mode).
        use_output_bias: add the decoder's own bias (default True).
        output_bias_initializer: its initializer (default zeros).
        num_sampled: train the decoder with a sampled softmax over this
            many candidates (:mod:`keras_rnnlm.layers.sampled_softmax`;
            0: always the full softmax).
        sampler_power: the candidate sampler's ``power``.
        sampler_seed: the candidate sampler's seed.
        **kwargs: every argument of ``keras.layers.Embedding``.

    Call arguments:
        inputs: int ids (embed) or float features (``reverse=True``).
        reverse: decode instead of embed.
        targets: ``reverse=True`` with ``num_sampled``: the int target ids;
            with ``training=True`` the call returns the sampled-softmax
            logits ``(..., num_sampled + 1)``, the target's in column 0.
        training: see ``targets``.

    Example:

    >>> emb = TiedEmbedding(100, 8)
    >>> h = emb(np.array([[1, 2, 3]]))
    >>> emb(h, reverse=True).shape
    (1, 3, 100)
    """

    def __init__(
        self,
        input_dim,
        output_dim,
        use_output_bias=True,
        output_bias_initializer="zeros",
        num_sampled=0,
        sampler_power=1.0,
        sampler_seed=None,
        **kwargs,
    ):
        super().__init__(input_dim, output_dim, **kwargs)
        self.use_output_bias = use_output_bias
        self.output_bias_initializer = keras.initializers.get(
            output_bias_initializer
        )
        self.num_sampled = int(num_sampled)
        self.sampler_power = float(sampler_power)
        self.sampler_seed = sampler_seed
        if self.num_sampled:
            self.sampler = UnigramSampler(
                input_dim, sampler_power, seed=sampler_seed, name="sampler"
            )

    def build(self, input_shape=None):
        super().build(input_shape)
        if self.use_output_bias:
            self.output_bias = self.add_weight(
                name="output_bias",
                shape=(self.input_dim,),
                initializer=self.output_bias_initializer,
            )

    @property
    def variable_serialization_spec(self):
        # Embedding saves only the variables its spec names: add the bias.
        spec = copy.deepcopy(super().variable_serialization_spec)
        if self.use_output_bias:
            for names in spec.values():
                names.append("output_bias")
        return spec

    def call(self, inputs, reverse=False, targets=None, training=None):
        if not reverse:
            return super().call(inputs)
        if training and self.num_sampled and targets is not None:
            return sampled_logits(
                inputs,
                targets,
                lambda ids: gather_rows(self.embeddings, ids),
                (lambda ids: ops.take(self.output_bias, ids))
                if self.use_output_bias
                else None,
                self.sampler,
                self.num_sampled,
            )
        kernel = ops.cast(self.embeddings, inputs.dtype)

        def decode(rows):
            logits = ops.matmul(rows, ops.transpose(kernel))
            if self.use_output_bias:
                logits = logits + ops.cast(self.output_bias, logits.dtype)
            return logits

        return over_rows(inputs, decode)

    def compute_output_spec(
        self, inputs, reverse=False, targets=None, training=None
    ):
        if not reverse:
            return super().compute_output_spec(inputs)
        shape = (*inputs.shape[:-1], self.input_dim)
        return keras.KerasTensor(shape, dtype=self.compute_dtype)

    def compute_output_shape(self, input_shape, reverse=False):
        if not reverse:
            return super().compute_output_shape(input_shape)
        return (*input_shape[:-1], self.input_dim)

    def get_config(self):
        config = super().get_config()
        config.update(
            use_output_bias=self.use_output_bias,
            output_bias_initializer=keras.initializers.serialize(
                self.output_bias_initializer
            ),
            num_sampled=self.num_sampled,
            sampler_power=self.sampler_power,
            sampler_seed=self.sampler_seed,
        )
        return config
