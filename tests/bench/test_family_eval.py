"""bench/family_eval.py without timing anything: each family's PyTorch
reference, read back with the Keras weights, evaluates a stream in
windows (the state carried) to the Keras model's loss over the whole
stream; the bench's families and presets exist; the records pair each
Keras figure with the reference's."""

import os
import types

import numpy as np
import pytest
from evaluation_runs import run
from torch_references import CONFIGS
from torch_references import VOCAB
from torch_references import reference

from bench import family_eval
from bench.harness import ROOT


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_reference_evaluates_to_the_keras_loss(tmp_path, name):
    kmodel, lm, _ = reference(tmp_path, name)
    from bench.reference import sampling

    streams = np.random.default_rng(1).integers(0, VOCAB, (2, 11))
    out = np.asarray(kmodel(streams[:, :-1].astype(np.int32)), np.float64)
    top = out.max(-1, keepdims=True)
    log_p = out - top - np.log(np.exp(out - top).sum(-1, keepdims=True))
    want = -np.take_along_axis(log_p, streams[:, 1:, None], -1).mean()
    nll, count = sampling.evaluate(lm, streams, bptt=4)  # windows 4, 4, 2
    assert count == 20
    assert nll == pytest.approx(want, rel=1e-5)


def test_every_family_is_a_recipe_preset_with_a_reference():
    from keras_rnnlm.recipe import load_recipe

    for recipe, preset, _ in family_eval.FAMILIES.values():
        path = os.path.join(ROOT, "recipes", f"{recipe}.py")
        assert preset in load_recipe(path).PRESETS
    pytest.importorskip("torch")
    from bench.reference.sampling import FAMILIES

    assert {f for _, _, f in family_eval.FAMILIES.values()} <= set(FAMILIES)


def test_records_pair_each_keras_figure_with_the_references():
    args = types.SimpleNamespace(
        splits=["valid", "test"], isa="default", compile_cache="off"
    )
    shapes = {
        "mlstm": {"batch": {"valid": 32, "test": 1}, "bptt": 100, "params": 9}
    }
    samples = {
        ("mlstm", "valid", "keras"): [run(1000.0, 3.0), run(3000.0, 3.0)],
        ("mlstm", "valid", "torch"): [run(1000.0, 3.5, 8.0, 400.0)] * 2,
        ("mlstm", "test", "keras"): [run(500.0, 3.0)],
    }
    recs = {r["name"]: r for r in family_eval.records(args, shapes, samples)}
    rate = recs["mlstm_ptb_mlstm_paper_eval_valid_b32"]
    assert (rate["value"], rate["reference"], rate["ratio"]) == (
        2000.0, 1000.0, 2.0,
    )  # fmt: skip
    assert rate["nll_difference"] == pytest.approx(0.5)
    assert rate["reference_name"] == family_eval.REFERENCE_NAME
    assert (rate["family"], rate["batch"], rate["bptt"]) == ("mlstm", 32, 100)
    wall = recs["mlstm_ptb_mlstm_paper_eval_valid_b32_wall"]
    assert (wall["value"], wall["reference"], wall["lower_is_better"]) == (
        10.0, 8.0, True,
    )  # fmt: skip
    assert (
        recs["mlstm_ptb_mlstm_paper_eval_valid_b32_peak_rss"]["ratio"] == 2.25
    )
    test = recs["mlstm_ptb_mlstm_paper_eval_test_b1"]
    assert test["reference"] is None and test["ratio"] is None
    assert len(recs) == 6


def test_a_validation_run_adds_the_trainers_validation_rows():
    args = types.SimpleNamespace(
        splits=["valid"], isa="default", compile_cache="off",
        validation_passes=2,
    )  # fmt: skip
    shapes = {
        "zaremba": {"batch": {"valid": 20, "test": 1}, "bptt": 20, "params": 9}
    }
    validation = {
        "tokens_per_s": 1200.0, "first_tokens_per_s": 500.0, "nll": 5.0,
        "pass_seconds": [2, 1], "load_average": 1.0,
    }  # fmt: skip
    samples = {
        ("zaremba", "valid", "keras_validation"): [validation],
        ("zaremba", "valid", "torch_validation"): [
            {**validation, "tokens_per_s": 1000.0}
        ],
    }
    recs = {r["name"]: r for r in family_eval.records(args, shapes, samples)}
    assert set(recs) == {
        "zaremba_ptb_small_validation_b20",
        "zaremba_ptb_small_first_validation_b20",
    }
    assert recs["zaremba_ptb_small_validation_b20"]["ratio"] == 1.2
    assert recs["zaremba_ptb_small_validation_b20"]["family"] == "zaremba"
