"""Evaluators (static; dynamic evaluation and ensembles come later)."""

from keras_rnnlm.evaluation.evaluator import Evaluator

__all__ = ["Evaluator"]
