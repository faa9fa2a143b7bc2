"""Sentence scoring (KenLM semantics), streaming and N-best rescoring.

- :class:`Scorer` / :func:`load_scorer`: log10 / ln probabilities,
  per-token scores, perplexity, batched and streaming.
- :func:`build_inference_model`: the stateless state-in/state-out graph
  derived from any builder model (also what is exported).
- :mod:`keras_rnnlm.scoring.nbest`: N-best lists, rescoring, WER.
"""

from keras_rnnlm.scoring.inference_model import InferenceModel
from keras_rnnlm.scoring.inference_model import build_inference_model
from keras_rnnlm.scoring.inference_model import is_recurrent_layer
from keras_rnnlm.scoring.scorer import Scorer
from keras_rnnlm.scoring.scorer import ScoringState
from keras_rnnlm.scoring.scorer import SentenceScore
from keras_rnnlm.scoring.tokenization import Tokenization

__all__ = [
    "InferenceModel",
    "Scorer",
    "ScoringState",
    "SentenceScore",
    "Tokenization",
    "build_inference_model",
    "is_recurrent_layer",
]
