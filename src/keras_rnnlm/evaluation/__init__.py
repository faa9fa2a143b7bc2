"""Evaluation of language models: the static evaluator
(:mod:`~keras_rnnlm.evaluation.static`: exact perplexity of a split, and
the evaluation of a run), dynamic evaluation (Krause et al. 2018,
:mod:`~keras_rnnlm.evaluation.dynamic`), the continuous cache
(:mod:`~keras_rnnlm.evaluation.cache`), ensembles
(:mod:`~keras_rnnlm.evaluation.ensemble`) and the output-rank analysis
(:mod:`~keras_rnnlm.evaluation.rank`).

Only the static evaluator, which training uses, is imported here: the
other modules sit above training and are imported by their own names.
"""

from keras_rnnlm.evaluation.static import Evaluator
from keras_rnnlm.evaluation.static import evaluate_run
from keras_rnnlm.evaluation.static import make_evaluator

__all__ = ["Evaluator", "evaluate_run", "make_evaluator"]
