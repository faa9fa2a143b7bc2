"""The continuous cache pointer (Grave et al. 2017) against independent
NumPy float64 implementations."""

import math

import numpy as np
import pytest

from keras_rnnlm.evaluation.cache_pointer import CacheConfig
from keras_rnnlm.evaluation.cache_pointer import CacheMemory
from keras_rnnlm.evaluation.cache_pointer import CacheStream
from keras_rnnlm.evaluation.cache_pointer import KeyedSplit
from keras_rnnlm.evaluation.cache_pointer import cache_log_distribution
from keras_rnnlm.evaluation.cache_pointer import cache_log_probs_of
from keras_rnnlm.evaluation.cache_pointer import search_cache


def softmax(x):
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def reference_natural(h, y, logits, window, theta, lam):
    """Per token: the W previous positions that exist (float64)."""
    h = np.asarray(h, np.float64)
    pv = softmax(logits)
    out = []
    for t in range(len(y)):
        lo = max(0, t - window)
        p = pv[t]
        if t > lo:
            attn = softmax(theta * h[lo:t] @ h[t])
            pc = np.zeros(pv.shape[1])
            np.add.at(pc, y[lo:t], attn)
            p = (1 - lam) * pv[t] + lam * pc
        out.append(math.log(p[y[t]]))
    return np.array(out)


def reference_pointer_py(h, y, logits, window, theta, lam, bptt):
    """The control flow of awd-lstm-lm's pointer.py evaluate(): history
    appended a whole segment before scoring, cache used only at history
    index > window, history truncated to window after each segment."""
    h = np.asarray(h, np.float64)
    pv = softmax(logits)
    keys, values, out = None, None, []
    for s in range(0, len(y), bptt):
        seg = slice(s, min(s + bptt, len(y)))
        start = 0 if keys is None else len(keys)
        keys = h[seg] if keys is None else np.concatenate([keys, h[seg]])
        values = y[seg] if values is None else np.concatenate([values, y[seg]])
        for idx, t in enumerate(range(seg.start, seg.stop)):
            p = pv[t]
            g = start + idx
            if g > window:
                k, v = keys[g - window : g], values[g - window : g]
                attn = softmax(theta * k @ h[t])
                pc = np.zeros(pv.shape[1])
                np.add.at(pc, v, attn)
                p = lam * pc + (1 - lam) * pv[t]
            out.append(math.log(p[y[t]]))
        keys, values = keys[-window:], values[-window:]
    return np.array(out)


def random_stream(n=37, d=5, v=7, seed=0, b=None):
    rng = np.random.default_rng(seed)
    shape = (n,) if b is None else (b, n)
    h = rng.normal(size=(*shape, d)).astype(np.float32)
    logits = (2 * rng.normal(size=(*shape, v))).astype(np.float32)
    # a small vocabulary: targets repeat, so the cache has matches
    y = rng.integers(0, v, size=shape).astype(np.int32)
    return h, y, logits


def vocab_lp(logits, y):
    return np.log(np.take_along_axis(softmax(logits), y[..., None], -1))[..., 0]


def run_stream(h, y, logits, cache, bptt):
    keyed = KeyedSplit(h, y, vocab_lp(logits, y), bptt)
    return cache_log_probs_of(keyed, cache)


@pytest.mark.parametrize("window", [1, 3, 10, 100])
@pytest.mark.parametrize("bptt", [1, 4, 37])
def test_matches_numpy_reference(window, bptt):
    h, y, logits = random_stream()
    cache = CacheConfig(window, 0.7, 0.3)
    got = run_stream(h, y, logits, cache, bptt)
    want = reference_natural(h, y, logits, window, 0.7, 0.3)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_large_scores_stay_finite():
    h, y, logits = random_stream()
    cache = CacheConfig(8, 50.0, 0.5)  # exp(50 h.h) overflows float32
    got = run_stream(h, y, logits, cache, 5)
    want = reference_natural(h, y, logits, 8, 50.0, 0.5)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "cache", [CacheConfig(6, 1.0, 0.0), CacheConfig(0, 1.0, 0.4)]
)
def test_lambda_zero_and_window_zero_give_the_plain_model(cache):
    h, y, logits = random_stream()
    got = run_stream(h, y, logits, cache, 4)
    np.testing.assert_allclose(got, vocab_lp(logits, y), rtol=1e-6)
    memory = CacheMemory.empty(1, cache.window, h.shape[-1])
    dist = cache_log_distribution(h[None], logits[None], y[None], memory, cache)
    np.testing.assert_allclose(
        np.exp(dist[0]), softmax(logits), rtol=1e-5, atol=1e-7
    )


@pytest.mark.parametrize("reference", [False, True])
def test_distribution_sums_to_one_and_holds_the_target(reference):
    h, y, logits = random_stream(n=12)
    cache = CacheConfig(5, 1.3, 0.4, reference=reference)
    stream = CacheStream(cache, h.shape[-1])
    for s in range(0, 12, 4):
        seg = slice(s, s + 4)
        memory = stream.memory
        dist = cache_log_distribution(
            h[None, seg], logits[None, seg], y[None, seg], memory, cache
        )
        np.testing.assert_allclose(np.exp(dist).sum(-1), 1.0, rtol=1e-5)
        lp = stream.log_probs(
            h[None, seg],
            y[None, seg],
            vocab_lp(logits[None, seg], y[None, seg]),
        )
        at = np.take_along_axis(dist, y[None, seg, None], -1)[..., 0]
        np.testing.assert_allclose(lp, at, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("window,bptt", [(6, 4), (3, 5), (10, 37), (4, 1)])
def test_reference_flag_reproduces_pointer_py(window, bptt):
    h, y, logits = random_stream()
    cache = CacheConfig(window, 0.8, 0.25, reference=True)
    got = run_stream(h, y, logits, cache, bptt)
    want = reference_pointer_py(h, y, logits, window, 0.8, 0.25, bptt)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # the first W + 1 tokens are the plain model's
    plain = vocab_lp(logits, y)
    np.testing.assert_allclose(got[: window + 1], plain[: window + 1], 1e-6)
    natural = run_stream(h, y, logits, CacheConfig(window, 0.8, 0.25), bptt)
    assert not np.allclose(natural[1 : window + 1], plain[1 : window + 1])


def test_a_batch_of_documents_equals_one_at_a_time():
    h, y, logits = random_stream(n=20, b=3, seed=1)
    lp = vocab_lp(logits, y)
    cache = CacheConfig(7, 0.9, 0.3)
    batch = CacheStream(cache, h.shape[-1], batch_size=3)
    got = np.concatenate(
        [
            batch.log_probs(h[:, s : s + 6], y[:, s : s + 6], lp[:, s : s + 6])
            for s in range(0, 20, 6)
        ],
        axis=1,
    )
    for b in range(3):
        alone = run_stream(h[b], y[b], logits[b], cache, 6)
        np.testing.assert_allclose(got[b], alone, rtol=1e-5, atol=1e-6)


def test_memory_is_window_by_dim():
    h, y, logits = random_stream(n=30)
    stream = CacheStream(CacheConfig(4, 1.0, 0.1), h.shape[-1])
    lp = vocab_lp(logits, y)
    for s in range(0, 30, 7):
        stream.log_probs(
            h[None, s : s + 7], y[None, s : s + 7], lp[None, s : s + 7]
        )
        assert stream.memory.keys.shape == (1, 4, 5)
    np.testing.assert_array_equal(stream.memory.values[0], y[-4:])
    assert stream.memory.seen[0] == 30


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


def test_parse_settings_and_presets():
    assert CacheConfig.parse("window=20,theta=0.5,lambda=0.3") == (
        CacheConfig(20, 0.5, 0.3)
    )
    assert CacheConfig.parse("ptb") == CacheConfig(500, 1.0, 0.1)
    assert CacheConfig.parse("WT2") == CacheConfig(3785, 0.662, 0.1279)
    assert CacheConfig.parse("ptb,lambda=0.2,reference=1") == CacheConfig(
        500, 1.0, 0.2, reference=True
    )
    for bad in ("nope", "window=5", "window=5,theta=1,lambda=2", "w:3"):
        with pytest.raises(ValueError):
            CacheConfig.parse(bad)


@pytest.mark.slow  # ~12 s: keeps the default run near 10 min on 2 cores
def test_run_without_cache_equals_the_evaluator(tiny_run):
    from keras_rnnlm.evaluation.cache_pointer import cache_evaluate_run
    from keras_rnnlm.runs import evaluate_run

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

    from keras_rnnlm.evaluation.cache_pointer import tune_cache_run

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

    from keras_rnnlm.evaluation.cache_pointer import CacheEvaluator
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
