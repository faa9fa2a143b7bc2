"""keras_rnnlm: recurrent neural language models for Keras 3.

Subpackages: ``data`` (corpora, vocabulary, token streams), ``layers``
(cells, recurrent layers, heads), ``models`` (the builder), ``training``
(the ``model.fit`` trainer and metrics), ``callbacks``, ``evaluation``.
"""

__version__ = "0.1.0"
