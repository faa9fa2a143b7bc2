"""Keras Tuner hypermodels over the package's run configs."""

from keras_rnnlm.tuning.multicell import MultiCellHyperModel
from keras_rnnlm.tuning.multicell import trial_table

__all__ = ["MultiCellHyperModel", "trial_table"]
