"""Sentence-level training and evaluation (``data.state_reset =
"sentence"``; arXiv:2106.08927, Section 3.1)."""

import functools
import math

import numpy as np
import pytest
from keras import ops

from keras_rnnlm.config import ModelConfig
from keras_rnnlm.config import apply_overrides
from keras_rnnlm.data.sentences import sentence_starts
from keras_rnnlm.data.vocabulary import Vocabulary
from keras_rnnlm.evaluation.static import Evaluator
from keras_rnnlm.models import build_language_model
from keras_rnnlm.models import copy_weights
from keras_rnnlm.training import train


def test_evaluation_is_the_sum_of_sentences_scored_alone():
    """Metrics stay exact: the split's NLL under sentence reset is the sum
    of each sentence's NLL scored alone from the zero state (its inputs
    start at the <eos> before it)."""
    rng = np.random.default_rng(0)
    vocab = Vocabulary(["<eos>", "<unk>", *(f"w{i}" for i in range(10))])
    ids = []
    for _ in range(9):
        ids += list(rng.integers(2, 12, rng.integers(1, 8))) + [vocab.eos_id]
    ids = np.array(ids, np.int32)
    cfg = ModelConfig(embedding_dim=5, hidden_sizes=[6, 4], init_range=0.4)
    starts = functools.partial(sentence_starts, vocab=vocab, rule="line")
    ev = Evaluator(cfg, len(vocab), 1, 7, sentence_starts=starts)
    ref = build_language_model(cfg, len(vocab), None, stateful=False, seed=3)
    copy_weights(ref, ev.model)
    got = ev.evaluate(ids)
    cuts = [0, *np.flatnonzero(starts(ids)[:-1]), len(ids) - 1]
    cuts = sorted(set(int(c) for c in cuts))
    total = 0.0
    for a, b in zip(cuts[:-1], cuts[1:]):
        logits = ops.convert_to_numpy(ref(ids[None, a:b]))[0].astype("f8")
        logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        total -= logp[np.arange(b - a), ids[a + 1 : b + 1]].sum()
    assert got["tokens"] == len(ids) - 1
    np.testing.assert_allclose(got["nll"] * got["tokens"], total, rtol=1e-5)


FAMILIES = {
    "mmlstm": ["model.cell=mmlstm", "model.major_proportions=[0.75]"],
    "mlstm": ["model.cell=mlstm"],
    "multicell_lstm": [
        "model.cell=multicell_lstm",
        'model.cell_kwargs={"num_cells": 3}',
    ],
    "gru": ["model.cell=gru"],
    "keras_lstm": ["model.cell=keras_lstm"],
    "rnn": ["model.cell=simple_rnn"],
}


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param(
            [
                "model.hidden_sizes=[16]",
                'model.context={"weighting": "uniform", "window": 12}',
            ],
            id="cbow_context",
        ),
        # Variable windows are served with a free time axis, the reset
        # mask included, and the reset loop runs without a static length.
        pytest.param(
            ["data.variable_bptt=true", "data.bptt_max_delta=4"],
            id="variable_windows",
        ),
        # The Major-Minor, multiplicative, multi-cell and Keras families.
        *(
            pytest.param(
                ["model.hidden_sizes=[16]", *cell],
                id=name,
                marks=pytest.mark.slow,
            )
            for name, cell in FAMILIES.items()
        ),
    ],
)
def test_one_sentence_level_epoch(tiny_config, overrides):
    """One epoch of the tiny run under ``data.state_reset = "sentence"``
    (plus ``overrides``) gives finite validation and test perplexities."""
    cfg = apply_overrides(
        tiny_config,
        ["train.epochs=1", "data.state_reset=sentence", *overrides],
    )
    results = train(cfg)
    assert math.isfinite(results["valid"]["ppl"])
    assert math.isfinite(results["test"]["ppl"])
