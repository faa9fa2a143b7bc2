"""Keras Tuner hypermodels over the package's run configs."""

from keras_rnnlm.tuning.base import OBJECTIVE
from keras_rnnlm.tuning.base import RunConfigHyperModel
from keras_rnnlm.tuning.base import trial_table
from keras_rnnlm.tuning.major_minor import HiddenSizeHyperModel
from keras_rnnlm.tuning.major_minor import MajorMinorHyperModel
from keras_rnnlm.tuning.multicell import MultiCellHyperModel

__all__ = [
    "OBJECTIVE",
    "HiddenSizeHyperModel",
    "MajorMinorHyperModel",
    "MultiCellHyperModel",
    "RunConfigHyperModel",
    "trial_table",
]
