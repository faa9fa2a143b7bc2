"""The qualitative probe of the CBOW context module (Table 1 of *On the
long-term learning ability of LSTM LMs*, arXiv:2106.08927): the words
whose CBOW embeddings are nearest, by cosine, to the context vector d at
the end of a text."""

import re

import numpy as np
from keras import ops

from keras_rnnlm.layers.cbow_context import CBOWContext
from keras_rnnlm.models import build_language_model
from keras_rnnlm.models.context import context_layers
from keras_rnnlm.runs import load_run
from keras_rnnlm.runs import run_weights


def context_vector(layer, ids):
    """``d`` after reading ``ids`` from an empty window, with ``layer``'s
    weights (any :class:`CBOWContext`, stateful or not), NumPy (dim,)."""
    config = {**layer.get_config(), "stateful": False, "return_state": False}
    twin = CBOWContext.from_config(config)
    twin.build((None, None))
    twin.set_weights(layer.get_weights())
    ids = np.asarray(ids, np.int32)[None]
    return ops.convert_to_numpy(twin(ids))[0, -1]


def is_content_word(token):
    """A token of letters (hyphens and apostrophes allowed inside) that is
    not in gensim's English stop-word list: not punctuation, numbers,
    ``<unk>`` / ``<eos>`` or function words."""
    from gensim.parsing.preprocessing import STOPWORDS  # gensim: when used

    return (
        re.fullmatch(r"[^\W\d_]+(?:['-][^\W\d_]+)*", token) is not None
        and token.lower() not in STOPWORDS
    )


def context_words(model, vocab, tokens, top=5, content_only=False):
    """The ``top`` vocabulary words nearest to ``d`` at the end of
    ``tokens`` (token strings, OOV mapped to ``<unk>``), as ``[(word,
    cosine)]``, nearest first. ``content_only`` ranks only
    :func:`is_content_word` words (the mean of a window's embeddings lies
    near the frequent function words' embeddings, which then fill the
    list, most of all in a briefly trained model; the paper's Table 1
    lists content words only, and does not say whether it filtered).

    Raises:
        ValueError: ``model`` has no CBOW context layer.
    """
    layers = context_layers(model)
    if not layers:
        raise ValueError(
            f"Model {model.name!r} has no CBOW context (model.context)"
        )
    layer = layers[0]
    d = context_vector(layer, vocab.encode(list(tokens)))
    table = ops.convert_to_numpy(layer.embeddings).astype(np.float64)
    norms = np.linalg.norm(table, axis=1) * max(np.linalg.norm(d), 1e-30)
    cos = table @ d.astype(np.float64) / np.maximum(norms, 1e-30)
    if content_only:
        keep = np.array([is_content_word(t) for t in vocab.tokens])
        cos = np.where(keep, cos, -np.inf)
    best = np.argsort(-cos, kind="stable")[:top]
    best = best[np.isfinite(cos[best])]
    return [(vocab.id_to_token(int(i)), float(cos[i])) for i in best]


def context_words_run(run_dir, text, top=5, weights=None, content_only=False):
    """:func:`context_words` of a run's best (or given) weights for a
    whitespace-tokenised ``text``."""
    config, vocab = load_run(run_dir)
    weights = run_weights(run_dir, weights)
    model = build_language_model(config.model, len(vocab), None, stateful=False)
    model.load_weights(weights)
    return context_words(model, vocab, text.split(), top, content_only)
