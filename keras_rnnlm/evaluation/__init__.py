"""Evaluators: static (:class:`Evaluator`) and dynamic
(:class:`DynamicEvaluator`, Krause et al. 2018)."""

from keras_rnnlm.evaluation.dynamic import DynamicEvaluator
from keras_rnnlm.evaluation.evaluator import Evaluator

__all__ = ["DynamicEvaluator", "Evaluator"]
