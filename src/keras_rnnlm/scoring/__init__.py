"""Sentence scoring (KenLM semantics), streaming and N-best rescoring.

- :class:`Scorer` / :func:`load_scorer`: log10 / ln probabilities,
  per-token scores, perplexity, batched and streaming.
- :func:`build_inference_model`: the stateless state-in/state-out graph
  derived from any builder model (also what is exported).
- :mod:`keras_rnnlm.scoring.nbest`: N-best lists, rescoring, WER.

Names are imported lazily, on first use: importing the package, or only
:mod:`~keras_rnnlm.scoring.nbest` (N-best lists and WER, no model), does
not load the scorer and its model stack.
"""

import importlib

_EXPORTS = {
    "InferenceModel": "inference_model",
    "build_inference_model": "inference_model",
    "is_recurrent_layer": "inference_model",
    "Scorer": "scorer",
    "ScoringState": "scorer",
    "SentenceScore": "scorer",
    "Tokenization": "tokenization",
    "SavedModelScorer": "loading",
    "load_scorer": "loading",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{_EXPORTS[name]}")
    return getattr(module, name)
