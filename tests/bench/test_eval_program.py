"""bench/eval_program.py on a small preset and a few tokens, run as a
user runs it (what it records, not how fast)."""

import json
import subprocess
import sys

import pytest

from bench.harness import ROOT


@pytest.mark.slow
def test_both_forms_are_timed_and_the_choice_recorded(tmp_path):
    out = tmp_path / "eval_program.jsonl"
    command = [
        sys.executable,
        "-m",
        "bench.eval_program",
        "--recipe",
        "recipes/zaremba_ptb.py",
        "--preset",
        "small",
        "--batch",
        "4",
        "--tokens",
        "400",
        "--passes",
        "2",
        "--threads",
        "2",
        "--out",
        str(out),
    ]
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (rec,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert rec["name"] == "eval_program_zaremba_ptb_small_b4_bptt20"
    assert len(rec["runs"]) == len(rec["reference_runs"]) == 2
    assert rec["ratio"] > 0 and rec["tokens"] == 400
    # small steps, two inter-op threads: the graph whose windows overlap
    assert rec["auto_choice"] == "graph"
    assert "auto picks the graph" in done.stdout
    assert rec["cpu_model"] and rec["threads"] == 2
