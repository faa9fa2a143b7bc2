"""Training with a sampled softmax through the one trainer: the training
metrics are the sampled loss, validation and test the full softmax."""

import csv
import json
import os

import pytest

from keras_rnnlm.config import apply_overrides
from keras_rnnlm.training import train


@pytest.mark.slow
def test_sampled_softmax_run_learns_and_reports_full_perplexity(tiny_config):
    cfg = apply_overrides(
        tiny_config,
        [
            "train.epochs=3",
            "model.head=tied",
            "model.sampled_softmax=8",
        ],
    )
    results = train(cfg)
    out = cfg.train.out_dir
    vocab = json.load(open(os.path.join(out, "vocab.json")))["tokens"]
    assert results["valid"]["ppl"] < 0.3 * len(vocab)
    assert results["test"]["ppl"] < 0.3 * len(vocab)
    with open(os.path.join(out, "log.csv")) as f:
        rows = list(csv.DictReader(f))
    assert "sampled_ppl" in rows[0] and "ppl" not in rows[0]
    val = [float(r["val_ppl"]) for r in rows]
    assert val[-1] < val[0]
    # the exported stateless model is the full-softmax one
    import keras

    model = keras.saving.load_model(os.path.join(out, "model.keras"))
    assert not isinstance(model.input, dict)
    assert model.output.shape[-1] == len(vocab)
    # and the scorer of the run normalises over the whole vocabulary
    import math

    from keras_rnnlm.scoring import Scorer

    scorer = Scorer.from_run(out)

    def p_first(word):
        return math.exp(
            scorer.full_scores(word, eos=False, natural_log=True)[0][0]
        )

    total = sum(p_first(w) for w in vocab if w != "<eos>")
    total += math.exp(scorer.full_scores("", natural_log=True)[0][0])
    assert abs(total - 1.0) < 1e-4


@pytest.mark.slow
def test_sampled_softmax_with_variable_bptt_and_untied_head(tiny_config):
    cfg = apply_overrides(
        tiny_config,
        [
            "train.epochs=1",
            "model.sampled_softmax=5",
            "model.sampler_power=0.75",
            "data.variable_bptt=true",
        ],
    )
    results = train(cfg)
    assert results["valid"]["ppl"] > 1.0
