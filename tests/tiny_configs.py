"""Tiny runs the tests train: :func:`tiny_awd_doc_config` (every AWD
regulariser, the DOC head, variable BPTT, NT-ASGD with a non-monotone
interval of 0) and :func:`tiny_overrides` (a recipe preset cut down to a
one-layer model of 8 units, for the tuner tests).

Tests import them as ``from tiny_configs import tiny_overrides``
(``tests/`` is on ``sys.path``: pytest puts the directory of
``tests/conftest.py`` there).
"""

from keras_rnnlm.config import RunConfig


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
