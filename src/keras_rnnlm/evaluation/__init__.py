"""Evaluators beyond the static one: dynamic evaluation (Krause et al.
2018), ensembles and the output-rank analysis. The static evaluator is
:class:`keras_rnnlm.evaluator.Evaluator`, re-exported here."""

from keras_rnnlm.evaluation.dynamic import DynamicEvaluator
from keras_rnnlm.evaluator import Evaluator

__all__ = ["DynamicEvaluator", "Evaluator"]
