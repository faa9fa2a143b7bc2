"""Analyses of trained runs (feature masking, ...)."""

from keras_rnnlm.analysis.feature_masking import DEFAULT_PS
from keras_rnnlm.analysis.feature_masking import FeatureMask
from keras_rnnlm.analysis.feature_masking import FeatureMaskingEvaluator
from keras_rnnlm.analysis.feature_masking import feature_masking
from keras_rnnlm.analysis.feature_masking import plot_curves
from keras_rnnlm.analysis.feature_masking import write_csv

__all__ = [
    "DEFAULT_PS",
    "FeatureMask",
    "FeatureMaskingEvaluator",
    "feature_masking",
    "plot_curves",
    "write_csv",
]
