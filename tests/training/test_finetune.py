"""Finetuning (keras_rnnlm.training.finetune): starts from the run's best
checkpoint, averages from the first step, keeps the run's non-monotone
interval, and stops repeating when a round does not improve."""

import json
import os

import numpy as np
import pytest
from run_dirs import checkpoint_state
from run_dirs import run_log

from keras_rnnlm.config import apply_overrides
from keras_rnnlm.training import train
from keras_rnnlm.training.finetune import finetune


def _parent(tiny_config, nonmono):
    cfg = apply_overrides(
        tiny_config,
        [
            "train.epochs=1",
            "train.optimizer=sgd",
            "train.learning_rate=1.0",
            f"train.nt_asgd_nonmono={nonmono}",
        ],
    )
    train(cfg)
    return cfg.train.out_dir


@pytest.mark.parametrize("nonmono, expected", [(0, 0), ("null", 5)])
@pytest.mark.slow
def test_finetune_starts_from_best_and_stops_without_gain(
    tiny_config, nonmono, expected
):
    """With learning rate 0 every iterate, hence the average, is the
    parent's best checkpoint: each epoch's validation loss is the parent's
    best one, the non-monotone rule (a strict increase) never fires, so
    the round runs its 2 epochs, and it does not improve, so a second
    round is not started."""
    run = _parent(tiny_config, nonmono)
    with open(os.path.join(run, "best.json")) as f:
        parent_best = float(json.load(f)["val_loss"])
    rounds = finetune(
        run, rounds=3, overrides=["train.learning_rate=0", "train.epochs=2"]
    )
    assert len(rounds) == 1
    r = rounds[0]
    assert r["run_dir"] == os.path.join(run, "finetune1")
    assert r["start_val_loss"] == parent_best
    log = run_log(r["run_dir"])
    assert len(log) == 2
    vals = [float(row["val_loss"]) for row in log]
    np.testing.assert_allclose(vals, parent_best, rtol=1e-6)
    assert [float(row["asgd"]) for row in log] == [1.0, 1.0]
    np.testing.assert_allclose(r["best_val_loss"], parent_best, rtol=1e-6)
    with open(os.path.join(r["run_dir"], "config.json")) as f:
        t = json.load(f)["train"]
    assert t["nt_asgd_nonmono"] == expected
    assert t["nt_asgd_from_start"] and t["stop_on_nonmono"]
    assert t["learning_rate"] == 0
    state = checkpoint_state(r["run_dir"])
    assert state["callbacks"]["NTASGD"]["stopped_epoch"] is None
