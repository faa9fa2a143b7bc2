"""The CBOW context layers of a model and their IDF weights
(``model.context``; *On the long-term learning ability of LSTM LMs*,
arXiv:2106.08927).

The IDF weights are data, not parameters: a non-trainable weight of each
:class:`~keras_rnnlm.layers.cbow_context.CBOWContext` with
``weighting="idf"``, set once on the training model from the training
split (:func:`~keras_rnnlm.data.documents.corpus_idf`), saved with the
weights and copied with them
(:func:`~keras_rnnlm.models.weights.copy_weights`).
"""

from keras import ops

from keras_rnnlm.layers.cbow_context import CBOWContext


def context_layers(model):
    """The :class:`CBOWContext` layers of ``model``, in layer order."""
    return [
        layer
        for layer in model._flatten_layers(include_self=False)
        if isinstance(layer, CBOWContext)
    ]


def idf_layers(model):
    """The context layers of ``model`` weighted by IDF."""
    return [la for la in context_layers(model) if la.weighting == "idf"]


def set_context_idf(model, idf):
    """Sets the IDF of every IDF-weighted context layer; returns their
    number."""
    layers = idf_layers(model)
    for layer in layers:
        layer.set_idf(idf)
    return len(layers)


def copy_context_data(source, target):
    """Copies the IDF weights between two models of one config."""
    src, dst = idf_layers(source), idf_layers(target)
    if len(src) != len(dst):
        raise ValueError(
            f"Models differ: {len(src)} vs {len(dst)} IDF context layers"
        )
    for s, d in zip(src, dst):
        # a copy: on JAX the two models must not share a buffer (a
        # compiled step donates its variables' buffers)
        d.idf.assign(ops.copy(s.idf.value))
