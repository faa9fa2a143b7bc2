"""A tiny AWD-LSTM-DOC run for the tests that train one: every
regulariser, the DOC head, variable BPTT, NT-ASGD with a non-monotone
interval of 0.

Tests import it as ``from awd_testing import tiny_awd_doc_config``
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
