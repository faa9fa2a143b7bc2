"""The candidate samplers of a sampled-softmax model.

A model built with ``ModelConfig.sampled_softmax`` and ``targets_input``
(see :func:`~keras_rnnlm.models.builder.build_language_model`) trains on a
sampled softmax whose candidates a
:class:`~keras_rnnlm.layers.sampled_softmax.UnigramSampler` in its decoder
draws, from the training counts.
"""

import numpy as np

from keras_rnnlm.layers.sampled_softmax import UnigramSampler


def has_targets_input(model):
    """Whether ``model`` is a sampled-softmax training model (it takes
    ``{"tokens", "targets"}``; see
    :func:`~keras_rnnlm.models.builder.build_language_model`)."""
    return isinstance(model.input, dict) and "targets" in model.input


def model_samplers(model):
    """The candidate samplers of the model's decoder (tied embedding or
    ``SampledSoftmaxDense``); none without a sampled softmax."""
    found = [getattr(layer, "sampler", None) for layer in model.layers]
    return [s for s in found if isinstance(s, UnigramSampler)]


def set_sampler_counts(model, train_ids):
    """Sets every candidate sampler's proposal from the training ids
    (a no-op for a model without a sampled softmax); returns how many
    samplers were set."""
    samplers = model_samplers(model)
    for sampler in samplers:
        counts = np.bincount(
            np.asarray(train_ids).ravel(), minlength=sampler.vocab_size
        )
        sampler.set_counts(counts[: sampler.vocab_size])
    return len(samplers)
