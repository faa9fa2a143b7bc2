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
    "InferenceModel": "keras_rnnlm.inference_model",
    "build_inference_model": "keras_rnnlm.inference_model",
    "is_recurrent_layer": "keras_rnnlm.inference_model",
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
    target = _EXPORTS[name]
    if "." not in target:
        target = f"{__name__}.{target}"
    module = importlib.import_module(target)
    return getattr(module, name)
