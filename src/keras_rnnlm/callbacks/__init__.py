"""Training callbacks: state resets, validation, LR schedules, checkpoints."""

from keras_rnnlm.callbacks.base import StatefulCallback
from keras_rnnlm.callbacks.checkpoint import BestCheckpoint
from keras_rnnlm.callbacks.checkpoint import CheckpointWriteError
from keras_rnnlm.callbacks.checkpoint import TrainingCheckpoint
from keras_rnnlm.callbacks.interrupt import StopOnSignal
from keras_rnnlm.callbacks.interrupt import TrainingInterrupted
from keras_rnnlm.callbacks.logging import EpochLog
from keras_rnnlm.callbacks.logging import LearningCurve
from keras_rnnlm.callbacks.logging import NaNGuard
from keras_rnnlm.callbacks.logging import RunMetadata
from keras_rnnlm.callbacks.logging import TrainingDivergedError
from keras_rnnlm.callbacks.lr_schedules import ConstantLR
from keras_rnnlm.callbacks.lr_schedules import DivideOnPlateau
from keras_rnnlm.callbacks.lr_schedules import PlateauAnnealing
from keras_rnnlm.callbacks.lr_schedules import ZarembaDecay
from keras_rnnlm.callbacks.lr_schedules import make_lr_schedule
from keras_rnnlm.callbacks.progress import RunProgbar
from keras_rnnlm.callbacks.states import ResetStates
from keras_rnnlm.callbacks.validation import Validation

__all__ = [
    "BestCheckpoint",
    "CheckpointWriteError",
    "ConstantLR",
    "DivideOnPlateau",
    "EpochLog",
    "LearningCurve",
    "NaNGuard",
    "PlateauAnnealing",
    "ResetStates",
    "RunMetadata",
    "RunProgbar",
    "StatefulCallback",
    "StopOnSignal",
    "TrainingCheckpoint",
    "TrainingDivergedError",
    "TrainingInterrupted",
    "Validation",
    "ZarembaDecay",
    "make_lr_schedule",
]
