import csv
import os

import keras
import numpy as np
import pytest

from keras_rnnlm.analysis.feature_masking import FeatureMaskingEvaluator
from keras_rnnlm.analysis.feature_masking import bernoulli_mask
from keras_rnnlm.analysis.feature_masking import feature_masking
from keras_rnnlm.analysis.feature_masking import mask_uniforms
from keras_rnnlm.cli import main
from keras_rnnlm.config import RunConfig
from keras_rnnlm.evaluation.static import evaluate_run
from keras_rnnlm.runs import load_run_corpus
from keras_rnnlm.runs import open_run


def _masking_evaluator(run_dir, batch_size=1, seed=0):
    config, corpus = open_run(run_dir)
    ev = FeatureMaskingEvaluator(config, corpus, batch_size, seed=seed)
    ev.load_weights(os.path.join(run_dir, "best.weights.h5"))
    return ev, corpus


@pytest.mark.slow
def test_p0_reproduces_static_evaluation_exactly(tiny_run):
    static = evaluate_run(tiny_run, splits=("test",), write=False)
    ev, corpus = _masking_evaluator(tiny_run)
    r = ev.evaluate(corpus.test, p=0.0, layer="all", run=3)
    assert r["nll"] == static["test"]["nll"]
    assert r["tokens"] == static["test"]["tokens"]
    rows = feature_masking(
        [tiny_run], layers=["all", 2], ps=[0.0], runs=3, verbose=False
    )
    assert [row["layer"] for row in rows] == ["all", 2]
    for row in rows:
        assert row["ppls"] == [static["test"]["ppl"]] * 3
        assert row["mean_ppl"] == static["test"]["ppl"]
        assert row["std_ppl"] == 0.0


def test_masking_changes_ppl_reproducibly(tiny_run):
    ev, corpus = _masking_evaluator(tiny_run)
    ids = corpus.test
    rows = ev.curve(ids, ps=[0.0, 0.3], layer="all", runs=2)
    static, masked = rows
    assert masked["mean_ppl"] != static["mean_ppl"]
    assert masked["ppls"][0] != masked["ppls"][1]  # independent masks
    assert masked["mean_ppl"] == pytest.approx(np.mean(masked["ppls"]))
    # The masks come from the seed: the same seed gives the same values.
    assert ev.evaluate(ids, 0.3, "all", run=1)["ppl"] == masked["ppls"][1]
    one = ev.evaluate(ids, 0.3, 1, run=1)["ppl"]
    assert one not in (masked["ppls"][1], static["mean_ppl"])
    other, _ = _masking_evaluator(tiny_run, seed=7)
    assert other.evaluate(ids, 0.3, "all", run=1)["ppl"] != masked["ppls"][1]
    with pytest.raises(ValueError, match="out of range"):
        ev.set_masks(0.1, layer=3)


def test_mask_fraction_scaling_and_nesting():
    u = mask_uniforms(20000, seed=3, run=1, layer=0)
    assert np.all(np.asarray(bernoulli_mask(u, 0.0)) == 1.0)
    previous = None
    for p in (0.05, 0.25, 0.5):
        m = np.asarray(bernoulli_mask(u, p))
        zeros = m == 0
        assert zeros.mean() == pytest.approx(p, abs=0.015)
        np.testing.assert_allclose(m[~zeros], 1.0 / (1.0 - p), rtol=1e-6)
        if previous is not None:
            assert np.all(zeros[previous])  # masks grow with P
        previous = zeros
    other = np.asarray(bernoulli_mask(mask_uniforms(20000, 3, 2, 0), 0.5))
    assert np.mean((other == 0) == previous) < 0.6  # another run's mask
    with pytest.raises(ValueError):
        bernoulli_mask(u, 1.0)


def test_mask_is_fixed_over_time_and_windows(tiny_run):
    ev, corpus = _masking_evaluator(tiny_run, batch_size=2)
    ev.set_masks(0.5, layer="all", run=0)
    masks = [np.asarray(m.mask) for m in ev.masks]
    assert [m.size for m in ev.masks] == [16, 16]
    probe = keras.Model(
        ev.model.inputs,
        [t for m in ev.masks for t in (m.input, m.output)],
    )
    tokens = np.asarray(corpus.test[:32], "int32").reshape(2, 16)
    for window in (tokens[:, :8], tokens[:, 8:]):  # state carried
        outs = [np.asarray(o) for o in probe([window])]
        for (raw, masked), mask in zip(zip(outs[::2], outs[1::2]), masks):
            np.testing.assert_allclose(masked, raw * mask, rtol=1e-6)
            dropped = mask == 0
            assert dropped.any() and not dropped.all()
            assert np.all(masked[:, :, dropped] == 0)  # every step, stream
            assert np.all(masked[:, :, ~dropped] != 0)
    # A whole evaluation pass leaves the drawn masks unchanged.
    ev.evaluator.evaluate(corpus.test)
    for m, before in zip(ev.masks, masks):
        np.testing.assert_array_equal(np.asarray(m.mask), before)
    ev.clear()
    assert all(np.all(np.asarray(m.mask) == 1.0) for m in ev.masks)


def test_mmlstm_mask_covers_major_and_minor(tiny_config):
    model = {
        **tiny_config.to_dict()["model"],
        "cell": "mmlstm",
        "hidden_sizes": [10, 6],
        "major_proportions": [0.7, 0.5],
    }
    config = RunConfig.from_dict({**tiny_config.to_dict(), "model": model})
    corpus = load_run_corpus(config)
    ev = FeatureMaskingEvaluator(config, corpus, 2, seed=1)
    assert [m.size for m in ev.masks] == [10, 6]  # [major, minor] outputs
    ids = corpus.valid[:200]
    static = ev.evaluate(ids)["ppl"]
    assert np.isfinite(static)
    assert ev.evaluate(ids, 0.4, "all")["ppl"] != static
    assert ev.evaluate(ids)["ppl"] == static  # masks cleared afterwards


def test_cli_writes_csv_and_png(tiny_run, tmp_path, capsys):
    weights = os.path.join(tiny_run, "best.weights.h5")
    out = tmp_path / "fm"
    argv = ["feature-masking", tiny_run, weights, "--layer", "all", "1"]
    argv += ["--p", "0", "0.2", "--runs", "2", "--out", str(out)]
    argv += ["--split", "valid", "--max-tokens", "200"]
    assert main(argv) == 0
    assert (out / "feature_masking.png").stat().st_size > 0
    with open(out / "feature_masking.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * 2 * 2  # checkpoints x layers x P
    assert set(rows[0]) == {
        "run",
        "layer",
        "p",
        "mean_ppl",
        "std_ppl",
        "ppl_1",
        "ppl_2",
    }
    assert {r["run"] for r in rows} == {
        "tiny_scoring_run",
        "tiny_scoring_run/best",
    }
    assert {r["layer"] for r in rows} == {"all", "1"}
    for r in rows:
        values = [float(r["ppl_1"]), float(r["ppl_2"])]
        assert float(r["mean_ppl"]) == pytest.approx(np.mean(values))
        if r["p"] == "0":
            assert values[0] == values[1]
    assert "wrote" in capsys.readouterr().out
    with pytest.raises(SystemExit):  # argparse: not a layer
        main(["feature-masking", tiny_run, "--layer", "first"])
