"""bench/harness/evaluation.py's validation runs without timing anything:
the package's child evaluates the run as the trainer validates it, the
figures of K passes leave the first (compiling) one out of the later
passes' rate, and the records pair them with the reference's."""

import argparse
import os
import types

import pytest
from evaluation_runs import run

from bench.harness import evaluation


def test_a_validation_run_rates_the_later_passes(monkeypatch):
    clock = iter([0.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0])
    monkeypatch.setattr(evaluation.time, "perf_counter", lambda: next(clock))
    r = evaluation.validation_result(
        lambda: (2.5, 1000), 3, started=0.0, extra=1
    )
    assert r["pass_seconds"] == [4.0, 1.0, 2.0]
    assert r["seconds"] == 1.5  # the median of the later passes
    assert r["tokens_per_s"] == pytest.approx(1000 / 1.5)
    assert r["first_tokens_per_s"] == 250.0
    assert (r["nll"], r["tokens"], r["extra"]) == (2.5, 1000, 1)
    assert r["command_s"] == 9.0
    assert r["rss_mb"] > 0


@pytest.mark.parametrize("passes", [1, -2])
def test_a_validation_run_needs_a_later_pass(passes, capsys):
    p = argparse.ArgumentParser(prog="bench")
    evaluation.add_evaluation_arguments(p)
    args = p.parse_args(["--validation-passes", str(passes)])
    with pytest.raises(SystemExit):
        evaluation.check_evaluation_arguments(p, args)
    assert "--validation-passes must be 0 or at least 2" in (
        capsys.readouterr().err
    )
    evaluation.check_evaluation_arguments(p, p.parse_args([]))


def _validation(tok_s, first, nll, passes):
    return {
        "tokens_per_s": tok_s,
        "first_tokens_per_s": first,
        "nll": nll,
        "pass_seconds": passes,
        "load_average": 1.0,
    }


def test_validation_records_pair_both_rates_with_the_references():
    args = types.SimpleNamespace(validation_passes=3, isa="default")
    runs = [_validation(900.0, 500.0, 5.0, [2, 1, 1])] * 2
    ref = [_validation(1000.0, 900.0, 5.5, [1, 1, 1])]
    recs = evaluation.validation_records(
        "zaremba_ptb_small", 20, runs, ref, "torch", args,
        {"bptt": 20, "params": 7}, family="zaremba",
    )  # fmt: skip
    by_name = {r["name"]: r for r in recs}
    later = by_name["zaremba_ptb_small_validation_b20"]
    assert (later["value"], later["reference"], later["ratio"]) == (
        900.0, 1000.0, 0.9,
    )  # fmt: skip
    first = by_name["zaremba_ptb_small_first_validation_b20"]
    assert (first["value"], first["reference"]) == (500.0, 900.0)
    assert later["nll_difference"] == pytest.approx(0.5)
    assert later["pass_seconds"] == [[2, 1, 1]] * 2
    assert (later["passes"], later["family"], later["split"]) == (
        3, "zaremba", "valid",
    )  # fmt: skip
    alone = evaluation.validation_records(
        "x", 20, runs, None, None, args, {"bptt": 20, "params": 7}
    )
    assert {r["ratio"] for r in alone} == {None}


def test_the_keras_child_validates_as_the_trainer_does(tiny_run, monkeypatch):
    """The trainer's validation callback on the run's weights: the loss
    of the run's evaluator on its validation split, every pass."""
    from keras_rnnlm.evaluation.static import make_evaluator
    from keras_rnnlm.runs import load_run
    from keras_rnnlm.runs import load_run_corpus
    from keras_rnnlm.runs import run_weights

    # the test process's allocator and compile cache stay as they are
    monkeypatch.setattr("keras_rnnlm.cli.process.prepare_process", lambda: None)
    r = evaluation.keras_validation(tiny_run, 2)
    config, vocab = load_run(tiny_run)
    corpus = load_run_corpus(config, vocab)
    d = config.data
    ev = make_evaluator(config, corpus, d.eval_batch_size or d.batch_size)
    ev.load_weights(run_weights(tiny_run, None))
    want = ev.evaluate(corpus.valid)
    assert r["nll"] == pytest.approx(want["nll"], rel=1e-6)
    assert r["tokens"] == want["tokens"]
    assert len(r["pass_seconds"]) == 2


def test_a_peak_rss_record_says_each_sides_growth_over_its_import():
    """With the frameworks' import peaks the memory record holds each
    side's median peak above its own import: within the reference's peak
    plus the frameworks' baseline when the package's growth is no more
    than the reference's."""
    args = types.SimpleNamespace(isa="default", compile_cache="off")
    shape = {"bptt": 35, "params": 1}
    keras = [run(1000.0, 5.0, rss=880.0), run(1000.0, 5.0, rss=900.0)]
    ref = [run(900.0, 5.0, rss=300.0)]

    def memory(ref_runs, baselines):
        recs = evaluation.eval_records(
            "m", "test", 1, keras, ref_runs, "ref", args, shape, baselines
        )
        return next(r for r in recs if r["kind"] == "memory")

    rss = memory(ref, (690.0, 220.0))
    assert (rss["keras_import_rss_mb"], rss["reference_import_rss_mb"]) == (
        690.0,
        220.0,
    )
    assert (rss["keras_growth_mb"], rss["reference_growth_mb"]) == (200, 80)
    assert rss["within_baseline"] is False
    assert memory([run(900.0, 5.0, rss=500.0)], (690.0, 220.0))[
        "within_baseline"
    ]
    assert "keras_growth_mb" not in memory(ref, None)
    assert "reference_growth_mb" not in memory(None, (690.0, 220.0))


def test_a_failed_evaluation_says_how_the_command_ended(tmp_path):
    with pytest.raises(RuntimeError, match=r"exited with 2:\n.*missing"):
        evaluation.cli_evaluate(
            str(tmp_path / "missing"), "valid", 10, 35, dict(os.environ),
            120, str(tmp_path / "log"),
        )  # fmt: skip
