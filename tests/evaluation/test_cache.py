"""Evaluation with the continuous cache pointer: the cache evaluator of a
run, the search of its settings, and the commands that use them."""

import math

import numpy as np
import pytest
from cache_references import random_stream
from cache_references import reference_pointer_py
from cache_references import vocab_lp

from keras_rnnlm.cache_pointer import CacheConfig
from keras_rnnlm.evaluation.cache import KeyedSplit
from keras_rnnlm.evaluation.cache import cache_log_probs_of
from keras_rnnlm.evaluation.cache import search_cache


def test_search_matches_single_settings():
    h, y, logits = random_stream()
    keyed = KeyedSplit(h, y, vocab_lp(logits, y), 5)
    rows = search_cache(keyed, [3, 9], [0.5, 1.0], [0.0, 0.2, 0.7])
    assert len(rows) == 12
    for row in rows:
        cache = CacheConfig(row["window"], row["theta"], row["lambda"])
        want = -np.mean(cache_log_probs_of(keyed, cache))
        assert row["nll"] == pytest.approx(want, rel=1e-6)
    rows = search_cache(keyed, [6], [0.8], [0.25], reference=True)
    want = reference_pointer_py(h, y, logits, 6, 0.8, 0.25, 5)
    assert rows[0]["nll"] == pytest.approx(-want.mean(), rel=1e-5)


@pytest.mark.slow  # ~12 s: keeps the default run near 10 min on 2 cores
def test_run_without_cache_equals_the_evaluator(tiny_run):
    from keras_rnnlm.evaluation.cache import cache_evaluate_run
    from keras_rnnlm.evaluation.static import evaluate_run

    plain = cache_evaluate_run(
        tiny_run, CacheConfig(0, 1.0, 0.1), split="valid", bptt=7
    )
    want = evaluate_run(
        tiny_run, ("valid",), {"valid": 1}, bptt=7, write=False
    )["valid"]
    assert plain["tokens"] == want["tokens"]
    assert plain["ppl"] == pytest.approx(want["ppl"], rel=1e-4)
    cached = cache_evaluate_run(
        tiny_run, CacheConfig.parse("window=50,theta=0.5,lambda=0.2"), "valid"
    )
    assert cached["tokens"] == want["tokens"]
    assert math.isfinite(cached["ppl"]) and cached["ppl"] != plain["ppl"]
    assert cached["cache"]["window"] == 50


def test_tune_cache_run_writes_its_outputs(tiny_run, tmp_path):
    import json

    from keras_rnnlm.evaluation.cache import tune_cache_run

    out = str(tmp_path / "cache")
    r = tune_cache_run(
        tiny_run,
        out,
        windows=[5, 20],
        thetas=[0.3, 1.0],
        lambdas=[0.0, 0.1, 0.3],
        max_tokens=120,
    )
    assert len(r["rows"]) == 12
    best = min(r["rows"], key=lambda row: row["nll"])
    assert r["best"]["window"] == best["window"]
    assert r["valid"]["cache"]["ppl"] <= r["valid"]["plain"]["ppl"] + 1e-9
    assert r["test"]["cache"]["tokens"] == r["test"]["plain"]["tokens"] == 120
    with open(r["outputs"]["json"]) as f:
        assert json.load(f)["best"] == r["best"]
    with open(r["outputs"]["csv"]) as f:
        assert len(f.read().strip().splitlines()) == 13
    assert (tmp_path / "cache" / "cache_search.png").stat().st_size > 1000


def _copy_run(tiny_run, tmp_path):
    import os
    import shutil

    run = tmp_path / "run"
    run.mkdir()
    for name in ("config.json", "vocab.json", "best.weights.h5"):
        shutil.copy(os.path.join(tiny_run, name), run / name)
    return str(run)


def test_cli_evaluate_and_tune_cache(tiny_run, tmp_path, capsys):
    import json
    import os

    from keras_rnnlm.cli.main import main

    run = _copy_run(tiny_run, tmp_path)
    args = ["evaluate", run, "--split", "test", "--max-tokens", "60"]
    assert main(args + ["--cache", "window=30,theta=0.4,lambda=0.2"]) == 0
    out = capsys.readouterr().out
    assert "test: ppl" in out and "window 30" in out
    assert main(args + ["--cache", "ptb,reference=1"]) == 0
    assert "window 500" in capsys.readouterr().out
    with pytest.raises(SystemExit):  # argparse: a setting lacks theta
        main(args + ["--cache", "window=3"])
    assert main(args + ["--cache", "ptb", "--batch-size", "4"]) == 2
    assert "--batch-size 1" in capsys.readouterr().err

    out_dir = os.path.join(run, "tuned")
    args = ["tune-cache", run, "--windows", "10", "40", "--thetas", "0.5"]
    args += ["--lambdas", "0", "0.2", "--max-tokens", "80", "--out", out_dir]
    assert main(args) == 0
    assert "best: window" in capsys.readouterr().out
    with open(os.path.join(out_dir, "cache_search.json")) as f:
        result = json.load(f)
    assert len(result["rows"]) == 4 and result["test"]["cache"]["tokens"] == 80
    assert os.path.exists(os.path.join(out_dir, "cache_search.png"))


@pytest.mark.slow
def test_dynamic_eval_with_cache(tiny_run, tmp_path, capsys):
    import json
    import os

    from keras_rnnlm.cli.main import main

    run = _copy_run(tiny_run, tmp_path)
    out = os.path.join(run, "dyn.json")
    # lr 0, lambda 0: the weights never change, so the dynamic pass
    # with the cache is the static model with the cache
    args = ["dynamic-eval", run, "--variant", "sgd", "--lr", "0"]
    args += ["--lambda", "0", "--bptt", "6", "--max-tokens", "50"]
    args += ["--cache", "window=20,theta=0.5,lambda=0.3", "--static"]
    assert main(args + ["--output", out]) == 0
    assert "with cache (without" in capsys.readouterr().out
    with open(out) as f:
        r = json.load(f)
    assert r["tokens"] == 50 and r["cache"]["window"] == 20
    assert r["ppl"] == pytest.approx(r["static_cache"]["ppl"], rel=1e-4)
    assert r["without_cache"]["ppl"] == pytest.approx(
        r["static"]["ppl"], rel=1e-4
    )
    assert r["ppl"] != pytest.approx(r["without_cache"]["ppl"], rel=1e-4)

    args = ["dynamic-eval", run, "--variant", "sgd", "--lr", "0.1"]
    args += ["--bptt", "5", "--max-tokens", "40", "--cache", "ptb"]
    assert main(args + ["--output", out]) == 0
    with open(out) as f:
        r = json.load(f)
    assert np.isfinite(r["ppl"]) and r["cache"]["window"] == 500


def test_score_document_with_cache_equals_the_stream(tiny_run, tiny_corpus_dir):
    import os

    from keras_rnnlm.evaluation.cache import CacheEvaluator
    from keras_rnnlm.runs import load_run
    from keras_rnnlm.scoring import Scorer

    with open(os.path.join(tiny_corpus_dir, "valid.txt")) as f:
        lines = f.read().splitlines()[:12]
    scorer = Scorer.from_run(tiny_run)
    plain = scorer.score_document(lines)
    state, chained = scorer.begin(), []
    for line in lines:
        state, r = scorer.continue_(state, line, eos=True)
        chained.append(r.ln_prob)
    np.testing.assert_allclose([r.ln_prob for r in plain], chained, 1e-5)
    none = scorer.score_document(lines, cache=CacheConfig(0, 1.0, 0.5))
    np.testing.assert_allclose([r.ln_prob for r in none], chained, rtol=1e-4)

    cache = CacheConfig(25, 0.7, 0.3)
    scores = scorer.score_document(lines, cache=cache)
    assert [len(r.tokens) for r in scores] == [len(r.tokens) for r in plain]
    # the same document as one id stream: <eos> line <eos> line ...
    config, vocab = load_run(tiny_run)
    ids = [vocab.eos_id]
    for line in lines:
        ids += [*vocab.encode(line.split()), vocab.eos_id]
    ev = CacheEvaluator(config.model, len(vocab), 9)
    ev.load_weights(os.path.join(tiny_run, "best.weights.h5"))
    r = ev.evaluate(np.array(ids), cache)
    total = sum(s.ln_prob for s in scores)
    assert r["tokens"] == sum(s.num_tokens for s in scores)
    assert -r["nll"] * r["tokens"] == pytest.approx(total, rel=1e-4)
    assert total != pytest.approx(sum(chained), rel=1e-4)


def test_cli_score_document_with_cache(tiny_run, tiny_corpus_dir, capsys):
    import json
    import os

    from keras_rnnlm.cli.main import main
    from keras_rnnlm.scoring import Scorer

    path = os.path.join(tiny_corpus_dir, "valid.txt")
    with open(path) as f:
        lines = f.read().splitlines()
    args = ["score", tiny_run, path, "--json", "--document"]
    assert main(args + ["--cache", "window=40,theta=0.5,lambda=0.2"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(rows) == len(lines) + 1
    cache = CacheConfig(40, 0.5, 0.2)
    want = Scorer.from_run(tiny_run).score_document(lines, cache=cache)
    got = [r["ln_prob"] for r in rows[:-1]]
    np.testing.assert_allclose(got, [r.ln_prob for r in want], rtol=1e-5)
    assert main(["score", tiny_run, path, "--cache", "ptb"]) == 2
    assert "--document" in capsys.readouterr().err
