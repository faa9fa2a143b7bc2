"""bench/family_trainer.py: the names and commands, the rate rule both
sides share, the records (and their headline table), the trainer's
windows handed to the PyTorch child, and each family's PyTorch loop on a
tiny config; the whole bench on a tiny corpus is a slow test."""

import argparse
import json
import os
import sys

import numpy as np
import pytest

from bench import family_trainer as ft
from bench.harness import ROOT
from bench.harness import trainer_runs
from bench.harness.headlines import headline_lines
from bench.harness.processes import CLI_CODE

#: Each family's preset cut down to a tiny model (on the tiny corpus).
TINY = {
    "zaremba": [
        "model.hidden_sizes=[8,8]",
        "model.embedding_dim=8",
        "model.dropout=0.2",
    ],
    "awd_lstm_mos": ["model.hidden_sizes=[12,12,8]", "model.embedding_dim=8"],
    "awd_lstm_doc": ["model.hidden_sizes=[12,12,8]", "model.embedding_dim=8"],
    "mlstm": ["model.hidden_sizes=[10]", "data.level=char"],
    "multicell": [
        "model.hidden_sizes=[8,8]",
        "model.embedding_dim=8",
        "model.cell_kwargs.num_cells=3",
    ],
    "awd_lstm": ["model.hidden_sizes=[12,12,8]", "model.embedding_dim=8"],
}


def _args(*argv):
    return ft.parser().parse_args(["--data", "/data", *argv])


def test_presets_names_and_references():
    assert ft.chosen_presets([])["mlstm"] == "mlstm-paper"
    presets = ft.chosen_presets(["zaremba=medium"])
    assert presets["zaremba"] == "medium" and presets["awd_lstm"] == "cpu"
    with pytest.raises(ValueError):
        ft.chosen_presets(["zaremba"])
    with pytest.raises(ValueError):
        ft.chosen_presets(["lstm=small"])
    assert ft.record_stem("zaremba", "small") == "zaremba_ptb_small"
    assert ft.record_stem("mlstm", "mlstm-paper") == "mlstm_ptb_mlstm_paper"
    assert ft.record_stem("awd_lstm", "cpu", "jax") == "awd_lstm_ptb_cpu_jax"
    assert ft.reference_name("awd_lstm_mos").startswith(
        "keras_rnnlm bench.reference.awd_lstm (PyTorch"
    )
    for family in ft.FAMILIES:
        assert os.path.exists(ft.recipe_path(family)), family


def test_the_trainer_runs_the_recipe_as_a_user_does():
    args = _args("--set", "train.epochs=1")
    cmd = ft.trainer_command(
        ft.recipe_path("multicell"), "small", "/tmp/out", args.sets
    )
    assert cmd[0] == sys.executable
    assert cmd[1:5] == [
        "-c",
        CLI_CODE,
        "train",
        os.path.join(ROOT, "recipes", "multicell_ptb.py"),
    ]
    assert cmd[5:10] == [
        "--preset",
        "small",
        "--out",
        "/tmp/out",
        "--no-resume",
    ]
    sets = [cmd[k + 1] for k, a in enumerate(cmd) if a == "--set"]
    assert sets == [
        "train.verbose=0",
        "train.timing_log=true",
        "train.epochs=1",
    ]


def test_a_rate_counts_the_new_window_lengths_on_both_sides():
    times = [10.0, 11.0, 12.0, 14.0, 15.0]
    tokens = [700, 700, 800, 700, 600]
    got = trainer_runs.batch_rate(times, tokens, 1, 4)
    assert got["tok_s"] == pytest.approx(2800 / 5.0)
    assert got["new_length_batches"] == 2  # the 800 and the 600
    assert got["tok_s_seen_lengths"] == pytest.approx(1400 / 3.0)
    every_new = trainer_runs.batch_rate(times, tokens, 2, 1)
    assert every_new["tok_s_seen_lengths"] is None
    assert trainer_runs.batch_rate(times, tokens, 2, 4) is None
    run = {
        "start": 9.0,
        "rss_mb": 400.0,
        "result": {"times": times, "tokens": tokens},
    }
    torch_side = ft.torch_rate(run, 1, 4)
    assert torch_side["tok_s"] == got["tok_s"]
    assert torch_side["first_batch_s"] == 1.0
    assert ft.torch_rate({"result": None}, 1, 4) is None


def _trainer_run(times, tokens, rss):
    rows = [
        {"event": "batch", "epoch": 0, "batch": k, "tokens": t, "time": s}
        for k, (t, s) in enumerate(zip(tokens, times))
    ]
    return {"rows": rows, "start": 0.0, "rss_mb": rss, "params": 1000}


def _torch_run(times, tokens, rss):
    result = {"times": times, "tokens": tokens, "params": 1010}
    return {"result": result, "start": 0.0, "rss_mb": rss, "params": 1010}


def _plan(family="awd_lstm", preset="cpu"):
    return {
        "family": family,
        "preset": preset,
        "config": {"data": {"batch_size": 20, "bptt": 35}},
        "char_level": False,
        "epoch_tokens": 929_000,
        "variable_bptt": True,
    }


def _samples():
    tokens = [700, 700, 700, 700]
    timing = {"tok_s": 350.0, "batch_s": [2.0, 2.0], "batch_tokens": [700, 700]}
    upstream = {"rss_mb": 800.0, "timing": timing}
    return {
        "keras": [_trainer_run([5.0, 5.5, 6.0, 6.5], tokens, 1100.0)],
        "torch": [_torch_run([2.0, 3.0, 4.0, 5.0], tokens, 600.0)],
        "upstream": [upstream],
    }


def test_records_pair_the_trainer_with_the_pytorch_model_and_upstream():
    args = _args("--warmup", "1", "--batches", "3")
    recs = {
        (r["name"], r["model"]): r
        for r in ft.family_records(args, _plan(), _samples())
    }
    keras = recs["awd_lstm_ptb_cpu_train", "keras"]
    assert keras["value"] == 1400.0  # 3 x 700 tokens in 1.5 s
    assert keras["reference"] == 700.0  # in 3 s
    assert keras["ratio"] == 2.0
    assert keras["reference_name"] == ft.reference_name("awd_lstm")
    assert keras["upstream_tok_s"] == 350.0
    assert keras["ratio_to_upstream"] == 4.0
    assert (keras["keras_params"], keras["reference_params"]) == (
        [1000],
        [1010],
    )
    assert keras["est_train_s_per_epoch"] == round(929_000 / 1400)
    assert keras["windows"] == "variable" and keras["unit"] == "tok/s"
    rss = recs["awd_lstm_ptb_cpu_train_peak_rss", "keras"]
    assert (rss["value"], rss["reference"]) == (1100.0, 600.0)
    torch_pair = recs["awd_lstm_ptb_cpu_train", "torch"]
    assert torch_pair["ratio"] == 2.0  # 700 against 350
    assert torch_pair["reference_name"].startswith("salesforce/awd-lstm-lm")
    assert recs["awd_lstm_ptb_cpu_train_peak_rss", "torch"]["reference"] == 800
    assert len(recs) == 4


def test_a_family_without_upstream_or_a_finished_trainer():
    args = _args("--warmup", "1", "--batches", "3", "--backend", "jax")
    samples = _samples()
    del samples["upstream"]
    plan = _plan("mlstm", "mlstm-paper")
    plan["char_level"] = True
    recs = ft.family_records(args, plan, samples)
    assert [r["name"] for r in recs] == [
        "mlstm_ptb_mlstm_paper_jax_train",
        "mlstm_ptb_mlstm_paper_jax_train_peak_rss",
    ]
    assert recs[0]["unit"] == "char/s" and "upstream_tok_s" not in recs[0]
    samples["keras"][0]["rows"] = samples["keras"][0]["rows"][:2]
    assert ft.family_records(args, plan, samples) == []


def test_the_headline_table_shows_the_records(tmp_path):
    args = _args("--warmup", "1", "--batches", "3")
    machine = {
        "device": "CPU AMD EPYC, AVX-512, 2 cores",
        "cpu_model": "AMD EPYC",
        "isa": ["sse4_2", "avx", "avx2", "fma", "avx512f"],
        "cores": 2,
        "threads": 2,
        "date": "2026-12-01",
    }
    recs = ft.family_records(args, _plan(), _samples())
    lines = headline_lines([("family_trainer", {**r, **machine}) for r in recs])
    text = "\n".join(lines)
    assert "repository's PyTorch models" in text
    assert "| awd lstm ptb cpu | 2 | 1,400 (2.00x) | 1,100 (1.83x) |" in text
    assert "| awd lstm ptb cpu torch | 2 | 700 (2.00x) | 600 (0.75x) |" in text


def _tiny_plan(family, corpus, tmp_path, warmup=1, batches=2):
    args = _args("--warmup", str(warmup), "--batches", str(batches))
    args.sets = [f"data.corpus={corpus}", "data.level=word", *TINY[family]]
    folder = tmp_path / family
    folder.mkdir()
    preset = ft.chosen_presets([])[family]
    return ft.make_plan(family, preset, args, str(folder)), str(folder)


def test_the_plan_holds_the_trainers_windows(tiny_corpus_dir, tmp_path):
    plan, folder = _tiny_plan("awd_lstm", tiny_corpus_dir, tmp_path)
    again, arrays = ft.load_plan(folder)
    assert again == json.loads(json.dumps(plan))
    starts, lengths = arrays["starts"], arrays["lengths"]
    assert len(starts) == 3 and starts[0] == 0
    assert np.array_equal(starts[1:], (starts + lengths)[:-1])  # contiguous
    assert np.allclose(arrays["lr_scales"], lengths / 35)  # none cut short
    assert set(lengths.tolist()) <= set(range(5, 76, 5))  # multiples of 5
    assert arrays["streams"].shape == (20, starts[-1] + lengths[-1] + 1)
    assert plan["variable_bptt"] and plan["config"]["train"]["seed"] == 141
    fixed, folder = _tiny_plan("zaremba", tiny_corpus_dir, tmp_path)
    _, arrays = ft.load_plan(folder)
    assert arrays["lengths"].tolist() == [20] * 3
    assert not fixed["variable_bptt"]


@pytest.mark.parametrize("family", list(ft.FAMILIES))
def test_each_familys_pytorch_loop_trains(family, tiny_corpus_dir, tmp_path):
    pytest.importorskip("torch")
    import torch

    plan, folder = _tiny_plan(family, tiny_corpus_dir, tmp_path)
    plan, arrays = ft.load_plan(folder)
    torch.manual_seed(0)
    lm = ft.torch_lm(plan)
    before = [p.detach().clone() for p in lm.params]
    times, tokens = ft.train_torch(lm, plan, arrays, 3)
    rows = arrays["streams"].shape[0]
    assert tokens == [rows * n for n in arrays["lengths"].tolist()]
    assert times == sorted(times) and len(times) == 3
    moved = [not torch.equal(a, p) for a, p in zip(before, lm.params)]
    assert all(moved), moved
    for p in lm.params:
        assert torch.isfinite(p).all()


def test_a_torch_child_reads_only_its_plan(tiny_corpus_dir, tmp_path):
    """The child of one family, as the parent runs it: no TensorFlow in
    the process, its batches timed."""
    pytest.importorskip("torch")
    _, folder = _tiny_plan("multicell", tiny_corpus_dir, tmp_path)
    args = _args("--warmup", "1", "--batches", "2")
    run = ft.run_torch(args, folder, str(tmp_path))
    assert run["returncode"] == 0, open(run["log"]).read()[-2000:]
    assert len(run["result"]["times"]) == 3
    assert ft.torch_rate(run, 1, 2)["tok_s"] > 0
    assert run["result"]["tensorflow_imported"] is False


@pytest.mark.slow
def test_the_bench_on_a_tiny_corpus(tiny_corpus_dir, tmp_path, capsys):
    """Every side of one family end to end: the trainer through the CLI
    and the PyTorch child, records printed."""
    pytest.importorskip("torch")
    argv = ["--families", "zaremba", "--impls", "keras", "torch"]
    argv += ["--warmup", "1", "--batches", "2", "--no-record", "--budget"]
    argv += ["300", "--data", tiny_corpus_dir]
    for s in [f"data.corpus={tiny_corpus_dir}", "data.level=word"]:
        argv += ["--set", s]
    for s in [*TINY["zaremba"], "train.tensorboard=false"]:
        argv += ["--set", s]
    ft.main(argv)
    out = capsys.readouterr().out
    recs = [json.loads(s) for s in out.splitlines() if s.startswith("{")]
    assert [r["name"] for r in recs] == [
        "zaremba_ptb_small_train",
        "zaremba_ptb_small_train_peak_rss",
    ]
    assert recs[0]["value"] > 0 and recs[0]["reference"] > 0
    assert recs[0]["keras_params"][0] > 0


def test_parent_only_options():
    args = argparse.Namespace(
        impls=["keras", "torch", "upstream"],
        sets=[],
        reference=ROOT,  # any folder
    )
    assert ft.upstream_preset(args, "awd_lstm", "cpu")
    assert not ft.upstream_preset(args, "awd_lstm", "small")
    assert not ft.upstream_preset(args, "zaremba", "cpu")
    args.sets = ["model.dropout=0.1"]
    assert not ft.upstream_preset(args, "awd_lstm", "cpu")
