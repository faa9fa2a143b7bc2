"""The continuous cache on sentence-level models (``data.state_reset =
"sentence"``): the model reads the reset mask as in the static
Evaluator, so the cache with ``W = 0`` or ``lambda = 0`` is the
Evaluator at batch 1."""

import functools
import os

import numpy as np
import pytest
from run_dirs import write_random_run

from keras_rnnlm.cache_pointer import CacheConfig
from keras_rnnlm.config import ModelConfig
from keras_rnnlm.config import RunConfig
from keras_rnnlm.data.sentences import sentence_starts
from keras_rnnlm.data.vocabulary import Vocabulary
from keras_rnnlm.evaluation.cache import CacheEvaluator
from keras_rnnlm.evaluation.static import Evaluator
from keras_rnnlm.models import build_language_model
from keras_rnnlm.models import copy_weights

CBOW = {"weighting": "positional", "window": 6}


def _stream(seed=0, sentences=12):
    rng = np.random.default_rng(seed)
    vocab = Vocabulary(["<eos>", "<unk>", *(f"w{i}" for i in range(10))])
    ids = []
    for _ in range(sentences):
        ids += [*rng.integers(2, 12, rng.integers(1, 8)), vocab.eos_id]
    starts = functools.partial(sentence_starts, vocab=vocab, rule="line")
    return vocab, np.array(ids, np.int32), starts


@pytest.mark.parametrize("context", [None, CBOW])
def test_cache_off_equals_the_sentence_level_evaluator(context):
    vocab, ids, starts = _stream()
    cfg = ModelConfig(
        embedding_dim=5, hidden_sizes=[6, 4], init_range=0.4, context=context
    )
    ref = build_language_model(cfg, len(vocab), None, stateful=False, seed=3)
    static = Evaluator(cfg, len(vocab), 1, 7, sentence_starts=starts)
    copy_weights(ref, static.model)
    want = static.evaluate(ids)
    # another segment length: the state (and the CBOW context) carried
    ev = CacheEvaluator(cfg, len(vocab), 5, sentence_starts=starts)
    copy_weights(ref, ev.model)
    for cache in (CacheConfig(0, 1.0, 0.3), CacheConfig(9, 0.5, 0.0)):
        got = ev.evaluate(ids, cache)
        assert got["tokens"] == want["tokens"] == len(ids) - 1
        assert got["nll"] == pytest.approx(want["nll"], rel=1e-5)
    cached = ev.evaluate(ids, CacheConfig(9, 0.5, 0.3))
    assert cached["nll"] != pytest.approx(want["nll"], rel=1e-4)
    # the mask matters: carrying the state over sentences differs
    carried = CacheEvaluator(cfg, len(vocab), 5)
    copy_weights(ref, carried.model)
    plain = carried.evaluate(ids, CacheConfig(0, 1.0, 0.3))
    assert plain["nll"] != pytest.approx(want["nll"], rel=1e-4)


def test_keyed_split_follows_the_mask():
    vocab, ids, starts = _stream(seed=1)
    cfg = ModelConfig(embedding_dim=5, hidden_sizes=[6], init_range=0.4)
    ref = build_language_model(cfg, len(vocab), None, stateful=False, seed=4)
    ev = CacheEvaluator(cfg, len(vocab), 4, sentence_starts=starts)
    copy_weights(ref, ev.model)
    keyed = ev.keyed_split(ids, max_tokens=30)
    assert len(keyed.targets) == 30
    want = ev.evaluate(ids, CacheConfig(0, 1.0, 0.0), max_tokens=30)
    got = -np.mean(keyed.vocab_log_probs)
    assert got == pytest.approx(want["nll"], rel=1e-6)
    # a sentence's first key equals the key of that sentence alone
    starts_at = np.flatnonzero(starts(ids)[1:30]) + 1
    first = int(starts_at[0])
    alone = CacheEvaluator(cfg, len(vocab), 4, sentence_starts=starts)
    copy_weights(ref, alone.model)
    rest = alone.keyed_split(ids[first:], max_tokens=3)
    np.testing.assert_allclose(
        keyed.keys[first : first + 3], rest.keys, rtol=1e-5, atol=1e-6
    )


@pytest.fixture
def sentence_run(tiny_corpus_dir, tmp_path):
    """A sentence-level run directory with a CBOW context (random
    weights: the evaluators must agree on any weights)."""

    config = RunConfig.from_dict(
        {
            "name": "tiny_sentence",
            "data": {
                "corpus": tiny_corpus_dir,
                "level": "word",
                "batch_size": 4,
                "bptt": 8,
                "state_reset": "sentence",
            },
            "model": {
                "embedding_dim": 8,
                "hidden_sizes": [8],
                "init_range": 0.5,
                "context": {"weighting": "uniform", "window": 10},
            },
            "train": {"out_dir": str(tmp_path), "tensorboard": False},
        }
    )
    return write_random_run(config, tmp_path / "run")[0]


def test_cache_evaluate_run_of_a_sentence_level_run(sentence_run):
    from keras_rnnlm.evaluation.cache import cache_evaluate_run
    from keras_rnnlm.evaluation.static import evaluate_run

    want = evaluate_run(
        sentence_run, ("valid",), {"valid": 1}, bptt=7, write=False
    )["valid"]
    plain = cache_evaluate_run(
        sentence_run, CacheConfig(0, 1.0, 0.1), split="valid", bptt=5
    )
    assert plain["tokens"] == want["tokens"]
    assert plain["ppl"] == pytest.approx(want["ppl"], rel=1e-4)
    assert os.path.basename(plain["weights"]) == "best.weights.h5"


@pytest.mark.slow  # ~8-17 s: XLA-compiled dynamic steps
def test_dynamic_eval_of_a_sentence_level_run(sentence_run):
    """lr 0: the dynamic pass (with and without the cache) is the static
    sentence-level model; ``static`` and ``static_cache`` read the mask
    too."""
    from keras_rnnlm.evaluation.dynamic import dynamic_evaluate_run
    from keras_rnnlm.evaluation.static import make_evaluator
    from keras_rnnlm.runs import open_run

    r = dynamic_evaluate_run(
        sentence_run,
        split="valid",
        variant="sgd",
        lr=0.0,
        lamb=0.0,
        bptt=6,
        max_tokens=50,
        static=True,
        cache=CacheConfig(20, 0.5, 0.3),
        write=False,
    )
    config, corpus = open_run(sentence_run)
    ev = make_evaluator(config, corpus, 1, bptt=6)
    ev.load_weights(os.path.join(sentence_run, "best.weights.h5"))
    want = ev.evaluate(corpus.valid[:51])
    assert r["tokens"] == want["tokens"] == 50
    assert r["without_cache"]["ppl"] == pytest.approx(want["ppl"], rel=1e-4)
    assert r["static"]["ppl"] == pytest.approx(want["ppl"], rel=1e-4)
    assert r["ppl"] == pytest.approx(r["static_cache"]["ppl"], rel=1e-4)
    assert r["ppl"] != pytest.approx(want["ppl"], rel=1e-4)
