"""The trainer (``model.fit`` + callbacks) and finetuning."""

from keras_rnnlm.training.trainer import compile_model
from keras_rnnlm.training.trainer import make_optimizer
from keras_rnnlm.training.trainer import prepare_run
from keras_rnnlm.training.trainer import train

__all__ = [
    "compile_model",
    "make_optimizer",
    "prepare_run",
    "train",
]
