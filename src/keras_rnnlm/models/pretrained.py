"""Word embeddings initialised from a word2vec file
(``model.pretrained_embeddings``).

*On the long-term learning ability of LSTM LMs* (arXiv:2106.08927)
initialises the word embeddings either at random or "with pretrained
embeddings obtained via Word2Vec". A run with

    model.pretrained_embeddings = {"path": FILE, "binary": None, "cbow": False}

starts (fresh runs only: a resumed run takes its weights from the
checkpoint) with the rows of its input embedding table (the ``embedding``
layer, also the decoder of a tied head) read from ``FILE``, a word2vec
file in the text or binary format (``binary``: ``None`` decides by the
name, binary for ``.bin``), read with gensim's ``KeyedVectors``. With
``"cbow": true`` the CBOW context table of ``model.context``
(:class:`~keras_rnnlm.layers.cbow_context.CBOWContext`) gets the same
vectors. Each vocabulary word is looked up by its exact string
(``<unk>``, ``<eos>`` included); a word missing from the file keeps its
random initial row, and :func:`apply_pretrained_embeddings` returns
(and the trainer prints and records in ``run.json``) how many.

``keras-rnnlm word2vec`` (:mod:`keras_rnnlm.data.word2vec`) writes such a
file from a corpus's training split.
"""

import os

import numpy as np

from keras_rnnlm.config import ConfigError
from keras_rnnlm.data.word2vec import is_binary_path
from keras_rnnlm.models.context import context_layers

#: The name of the builder's input embedding layer.
EMBEDDING_LAYER = "embedding"
KEY = "model.pretrained_embeddings"


def pretrained_spec(config):
    """``config.pretrained_embeddings`` with its defaults filled in
    (``None``: random init); raises ConfigError where the model has no
    table to initialise."""
    spec = config.pretrained_embeddings
    if spec is None:
        return None
    full = {"binary": None, "cbow": False, **spec}
    if config.input_encoding == "one_hot":
        raise ConfigError(
            f"{KEY} needs an embedding table: model.input_encoding is 'one_hot'"
        )
    if full["cbow"] and config.context is None:
        raise ConfigError(
            f"{KEY}.cbow initialises the CBOW context table: set "
            "model.context too (or cbow=false)"
        )
    return full


def load_word2vec(path, binary=None):
    """The ``KeyedVectors`` of a word2vec file (``binary=None``: by the
    name, :func:`~keras_rnnlm.data.word2vec.is_binary_path`). A missing
    or unreadable file is a ConfigError naming it."""
    from gensim.models import KeyedVectors  # gensim loads only when used

    if binary is None:
        binary = is_binary_path(path)
    kind = "binary" if binary else "text"
    if not os.path.isfile(path):
        raise ConfigError(f"{KEY}.path: no such word2vec file: {path}")
    try:
        return KeyedVectors.load_word2vec_format(path, binary=binary)
    except (ValueError, UnicodeDecodeError, EOFError, IndexError) as e:
        other = "text" if binary else "binary"
        raise ConfigError(
            f"{KEY}.path: {path} is not a word2vec {kind} file ({e}); if "
            f"it is in the {other} format, set {KEY}.binary="
            f"{'false' if binary else 'true'}"
        ) from e


def embedding_matrix(vectors, tokens, initial):
    """``initial`` (vocab, dim) with the row of every token found in
    ``vectors`` replaced by its vector; returns ``(matrix, missing)``,
    ``missing`` the tokens not found (in id order)."""
    initial = np.asarray(initial)
    if initial.shape[0] != len(tokens):
        raise ValueError(
            f"{len(tokens)} tokens for a table of {initial.shape[0]} rows"
        )
    if vectors.vector_size != initial.shape[1]:
        raise ConfigError(
            f"{KEY}: the word2vec vectors have {vectors.vector_size} "
            f"dimensions, the table has {initial.shape[1]}"
        )
    matrix = np.array(initial, copy=True)
    found = [i for i, t in enumerate(tokens) if t in vectors.key_to_index]
    if found:
        rows = [vectors.key_to_index[tokens[i]] for i in found]
        matrix[found] = vectors.vectors[rows].astype(matrix.dtype)
    found_set = set(found)
    missing = [t for i, t in enumerate(tokens) if i not in found_set]
    return matrix, missing


def pretrained_tables(model, spec):
    """The ``(name, variable)`` of every table ``spec`` initialises: the
    input embedding, and with ``spec["cbow"]`` each CBOW context table."""
    names = [layer.name for layer in model.layers]
    if EMBEDDING_LAYER not in names:
        raise ConfigError(f"{KEY}: the model has no embedding layer")
    tables = [(EMBEDDING_LAYER, model.get_layer(EMBEDDING_LAYER).embeddings)]
    if spec["cbow"]:
        layers = context_layers(model)
        if not layers:
            raise ConfigError(f"{KEY}.cbow: the model has no CBOW context")
        tables += [(layer.name, layer.embeddings) for layer in layers]
    return tables


def apply_pretrained_embeddings(model, vocab, config):
    """Initialises ``model``'s tables from ``config.pretrained_embeddings``
    (a :class:`~keras_rnnlm.config.ModelConfig`; nothing to do for
    ``None``).

    Returns ``None`` or a summary dict: ``path``, ``tables`` (the layer
    names), ``vocab``, ``found`` and ``missing`` (word counts) and
    ``missing_words`` (the first 20).
    """
    spec = pretrained_spec(config)
    if spec is None:
        return None
    vectors = load_word2vec(spec["path"], spec["binary"])
    tokens = vocab.tokens
    missing = None
    tables = pretrained_tables(model, spec)
    for _, variable in tables:
        matrix, missing = embedding_matrix(
            vectors, tokens, np.asarray(variable.value)
        )
        variable.assign(matrix.astype(variable.dtype))
    return {
        "path": spec["path"],
        "tables": [name for name, _ in tables],
        "vocab": len(tokens),
        "found": len(tokens) - len(missing),
        "missing": len(missing),
        "missing_words": missing[:20],
    }


def describe(summary):
    """One line about an :func:`apply_pretrained_embeddings` summary."""
    return (
        f"Pretrained embeddings from {summary['path']} "
        f"({', '.join(summary['tables'])}): {summary['found']} of "
        f"{summary['vocab']} words found, {summary['missing']} missing "
        "(random init)"
    )
