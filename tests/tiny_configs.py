"""Tiny runs the tests train: :func:`tiny_run_dict` (the two-layer LSTM
of the ``tiny_config`` fixture), :func:`tiny_awd_doc_config` (every AWD
regulariser, the DOC head, variable BPTT, NT-ASGD with a non-monotone
interval of 0) and :func:`tiny_overrides` (a recipe preset cut down to a
one-layer model of 8 units, for the tuner tests).

Tests import them as ``from tiny_configs import tiny_overrides``
(``tests/`` is on ``sys.path``: pytest puts the directory of
``tests/conftest.py`` there).
"""

import keras

from keras_rnnlm.config import RunConfig

# The plain evaluation step on TensorFlow: "auto" would XLA-compile a whole
# step per evaluator and process, which the tiny 60-token splits never
# repay (tests/evaluation/test_static.py covers the XLA step). JAX keeps
# its jitted step.
TINY_JIT = False if keras.backend.backend() == "tensorflow" else "auto"


def tiny_run_dict(corpus_dir, out_dir=None, model=None, train=None):
    """The tiny run (a two-layer LSTM of 16 units, Adam, two epochs,
    batches of 4 windows of 8 tokens) on the word corpus ``corpus_dir``,
    as a dict for ``RunConfig.from_dict``; ``model`` and ``train`` add to
    (or replace) its sections. Without ``out_dir`` the run directory is
    left to the caller (a recipe's ``--out``)."""
    return {
        "name": "tiny",
        "data": {
            "corpus": corpus_dir,
            "level": "word",
            "batch_size": 4,
            "bptt": 8,
            "eval_batch_size": 2,
            "test_batch_size": 1,
        },
        "model": {
            "embedding_dim": 16,
            "hidden_sizes": [16, 16],
            "init_range": 0.1,
            **(model or {}),
        },
        "train": {
            "epochs": 2,
            "optimizer": "adam",
            "learning_rate": 0.01,
            "clipnorm": 5.0,
            **({} if out_dir is None else {"out_dir": str(out_dir)}),
            "tensorboard": False,
            "verbose": 0,
            "jit_compile": TINY_JIT,
            **(train or {}),
        },
    }


def tiny_awd_doc_config(name, corpus_dir, data=None, train=None):
    """The tiny AWD-LSTM-DOC config on the word corpus ``corpus_dir``;
    ``data`` and ``train`` add to (or replace) its data and train
    sections."""
    return RunConfig.from_dict(
        {
            "name": name,
            "data": {
                "corpus": corpus_dir,
                "level": "word",
                "batch_size": 4,
                "bptt": 10,
                "variable_bptt": True,
                "bptt_max_delta": 5,
                "bptt_multiple": 5,
                "eval_batch_size": 2,
                **(data or {}),
            },
            "model": {
                "embedding_dim": 8,
                "hidden_sizes": [16, 8],
                "head": "doc",
                "mixture_components": [0, 2, 3],
                "locked_dropout": True,
                "dropout": 0.4,
                "dropouth": 0.25,
                "dropouti": 0.4,
                "dropoute": 0.1,
                "weight_dropout": 0.5,
                "dropoutl": 0.3,
                "cv_penalty": 0.001,
                "ar_alpha": 2.0,
                "tar_beta": 1.0,
                "rnn_init": "pytorch",
            },
            "train": {
                "clipnorm": 0.25,
                "weight_decay": 1.2e-6,
                "nt_asgd_nonmono": 0,
                "tensorboard": False,
                "verbose": 0,
                **(train or {}),
            },
        }
    )


def tiny_overrides(corpus_dir, learning_rate):
    """``--set`` overrides that cut a recipe preset down to a tiny run on
    the word corpus ``corpus_dir``: one layer of 8 units, batches of 4
    windows of 8 tokens."""
    return [
        f"data.corpus={corpus_dir}",
        "data.level=word",
        "data.batch_size=4",
        "data.bptt=8",
        "data.eval_batch_size=2",
        "model.embedding_dim=8",
        "model.hidden_sizes=[8]",
        f"train.learning_rate={learning_rate}",
        "train.verbose=0",
        "train.tensorboard=false",
    ]
