"""A tiny Keras model of each of ``bench.reference.sampling``'s families
and its PyTorch reference, saved with the Keras weights and read back,
for the benches' tests (``from torch_references import reference``;
``tests/`` is on ``sys.path``)."""

import dataclasses

import pytest

from keras_rnnlm.config import ModelConfig
from keras_rnnlm.models import build_language_model

VOCAB = 30

_AWD = {
    "embedding_dim": 8,
    "hidden_sizes": [12, 8],
    "rnn_init": "pytorch",
    "locked_dropout": True,
    "dropouti": 0.4,
    "dropouth": 0.25,
    "dropoute": 0.1,
    "weight_dropout": 0.5,
}

#: name -> (reference family, the tiny model's ModelConfig arguments).
CONFIGS = {
    "zaremba": ("zaremba", {"embedding_dim": 8, "hidden_sizes": [8, 8]}),
    "awd": ("awd", {**_AWD, "head": "tied"}),
    "awd_mos": ("awd", {**_AWD, "head": "mos", "mixture_components": 3}),
    "charlm": (
        "charlm",
        {
            "input_encoding": "one_hot",
            "hidden_sizes": [10],
            "cell": "mlstm",
            "init_range": None,
        },
    ),
    "multicell": (
        "multicell",
        {
            "embedding_dim": 8,
            "hidden_sizes": [8, 8],
            "cell": "multicell_lstm",
            "cell_kwargs": {"num_cells": 3, "strategy": "max"},
        },
    ),
}


def reference(tmp_path, name):
    """The tiny Keras model of ``name`` (:data:`CONFIGS`) and its PyTorch
    reference, saved with its weights and read back: ``(keras model,
    reference, words)``."""
    pytest.importorskip("torch")
    from bench.reference import sampling

    family, kwargs = CONFIGS[name]
    config = ModelConfig(**kwargs)
    kmodel = build_language_model(config, VOCAB, None, stateful=False, seed=3)
    words = [f"w{i}" for i in range(VOCAB)]
    path = str(tmp_path / "reference.pt")
    m = dataclasses.asdict(config)
    sampling.save_reference(path, family, kmodel, m, words)
    return kmodel, sampling.load_reference(path), words
