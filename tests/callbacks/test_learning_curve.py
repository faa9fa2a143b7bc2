"""The learning curve of a run: training perplexity a window of batches
and validation at every evaluation, titled with the run's name; a
one-epoch run shows more than its two epoch-end dots, and a run resumed
in the middle of an epoch plots the points of an uninterrupted one."""

import math
import os

import numpy as np
import pytest
from interrupting import Killed
from interrupting import kill
from PIL import Image
from run_dirs import checkpoint_state
from run_dirs import run_log

from keras_rnnlm.callbacks.logging import learning_curve_figure
from keras_rnnlm.config import apply_overrides
from keras_rnnlm.training import train


def _points(cfg):
    state = checkpoint_state(cfg.train.out_dir)
    return state["callbacks"]["LearningCurve"]["points"]


def test_one_epoch_curve_has_windows_validation_and_the_run_name(
    tiny_config,
):
    cfg = apply_overrides(tiny_config, ["train.epochs=1", "name=tiny_curve"])
    train(cfg)
    points = _points(cfg)
    trained = [p for p in points if p["split"] == "train"]
    valid = [p for p in points if p["split"] == "valid"]
    assert len(trained) > 2 and len(valid) == 1
    xs = [p["epoch"] for p in trained]
    assert xs == sorted(xs) and 0 < xs[0] < 0.1 and xs[-1] == 1.0
    (row,) = run_log(cfg.train.out_dir)
    # the windows are the epoch cut in parts: their token-weighted mean
    # NLL is the epoch's
    tokens = sum(p["tokens"] for p in trained)
    nll = sum(p["tokens"] * math.log(p["ppl"]) for p in trained) / tokens
    np.testing.assert_allclose(nll, float(row["nll"]), rtol=1e-5)
    assert valid[0]["epoch"] == 1.0
    np.testing.assert_allclose(valid[0]["ppl"], float(row["val_ppl"]))
    # the first window is the untrained model's: far above the last
    assert trained[0]["ppl"] > 2 * trained[-1]["ppl"]

    fig = learning_curve_figure(points, title=cfg.name)
    (ax,) = fig.axes
    assert [len(line.get_xdata()) for line in ax.get_lines()] == [
        len(trained),
        1,
    ]
    assert ax.get_title() == "tiny_curve"
    png = os.path.join(cfg.train.out_dir, "learning_curve.png")
    with Image.open(png) as image:
        assert image.text["Title"] == "tiny_curve"


@pytest.mark.slow
def test_mid_epoch_resume_plots_the_uninterrupted_points(tiny_config, tmp_path):
    """132 batches an epoch, a point every 3; killed after batch 23 with
    checkpoints every 10, the run resumes after batch 20, and its first
    batch ends a window: the window's totals include the batches before
    the kill, which the checkpoint adds only after that batch."""
    cfg = apply_overrides(
        tiny_config,
        ["train.epochs=1", "train.checkpoint_every_steps=10"],
    )
    straight = apply_overrides(cfg, [f"train.out_dir={tmp_path / 'straight'}"])
    train(straight)
    killed = apply_overrides(cfg, [f"train.out_dir={tmp_path / 'killed'}"])
    with pytest.raises(Killed):
        train(killed, callbacks=[kill(0, 22)])
    train(killed)
    a, b = _points(straight), _points(killed)
    assert len(a) == 44 + 1  # 44 windows of 3 batches, the validation
    assert [p["epoch"] for p in a] == [p["epoch"] for p in b]
    assert [p.get("tokens") for p in a] == [p.get("tokens") for p in b]
    np.testing.assert_allclose(
        [p["ppl"] for p in a], [p["ppl"] for p in b], rtol=1e-5
    )
