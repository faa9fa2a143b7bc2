"""The trainer (model.fit + callbacks), optimizers and metrics."""

from keras_rnnlm.metrics import BitsPerCharacter
from keras_rnnlm.metrics import Perplexity
from keras_rnnlm.metrics import TokenNLL
from keras_rnnlm.training.trainer import compile_model
from keras_rnnlm.training.trainer import evaluate_run
from keras_rnnlm.training.trainer import load_run
from keras_rnnlm.training.trainer import make_optimizer
from keras_rnnlm.training.trainer import prepare_run
from keras_rnnlm.training.trainer import train

__all__ = [
    "BitsPerCharacter",
    "Perplexity",
    "TokenNLL",
    "compile_model",
    "evaluate_run",
    "load_run",
    "make_optimizer",
    "prepare_run",
    "train",
]
