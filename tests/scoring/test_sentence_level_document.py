"""Document scoring of sentence-level runs (``data.state_reset =
"sentence"``): ``Scorer.score_document`` resets the
recurrent states at every sentence start, as training and the static
evaluators do, so that its scores equal theirs on the same text (with and
without the continuous cache, with and without a CBOW context)."""

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
from keras_rnnlm.scoring import Scorer
from keras_rnnlm.scoring.scorer import run_sentence_rule

CBOW = {"weighting": "uniform", "window": 10}
CACHE = CacheConfig(20, 0.5, 0.3)


def _run_config(corpus, state_reset="sentence", context=None, out="."):
    return RunConfig.from_dict(
        {
            "name": "tiny_sentence_doc",
            "data": {
                "corpus": corpus,
                "level": "word",
                "batch_size": 4,
                "bptt": 8,
                "state_reset": state_reset,
            },
            "model": {
                "embedding_dim": 8,
                "hidden_sizes": [8, 6],
                "init_range": 0.5,
                "context": context,
            },
            "train": {"out_dir": str(out), "tensorboard": False},
        }
    )


def _document(corpus_dir, n=12):
    """The first ``n`` lines of the tiny corpus's validation text."""
    with open(os.path.join(corpus_dir, "valid.txt")) as f:
        return f.read().splitlines()[:n]


def _stream_ids(lines, vocab):
    """The evaluators' stream of ``lines``: ``<eos>`` (the first line's
    context, as ``bos=True``), then each line and its ``<eos>``."""
    ids = [vocab.eos_id]
    for line in lines:
        ids += [*vocab.encode(line.split()), vocab.eos_id]
    return np.asarray(ids, np.int32)


def _flat(scores):
    return np.concatenate([r.ln_probs for r in scores])


@pytest.mark.parametrize("context", [None, CBOW], ids=["lstm", "cbow"])
def test_document_of_a_sentence_level_run_equals_the_evaluators(
    context, tiny_corpus_dir, tmp_path
):
    from keras_rnnlm.evaluation.static import make_evaluator
    from keras_rnnlm.runs import sentence_starts_of

    config = _run_config(tiny_corpus_dir, context=context, out=tmp_path)
    run, corpus = write_random_run(config, tmp_path / "run")
    weights = os.path.join(run, "best.weights.h5")
    lines = _document(tiny_corpus_dir)
    ids = _stream_ids(lines, corpus.vocab)

    scorer = Scorer.from_run(run)
    assert scorer.sentence_reset == "line"
    plain = scorer.score_document(lines)
    got = _flat(plain)
    assert len(got) == len(ids) - 1

    # per token: the cache evaluator's model scores (reset mask read)
    cached_ev = CacheEvaluator(
        config.model,
        len(corpus.vocab),
        5,
        sentence_starts=sentence_starts_of(corpus),
    )
    cached_ev.load_weights(weights)
    want = cached_ev.keyed_split(ids).vocab_log_probs
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # the static Evaluator (keras-rnnlm evaluate) at batch 1
    ev = make_evaluator(config, corpus, 1, bptt=7)
    ev.load_weights(weights)
    static = ev.evaluate(ids)
    assert static["tokens"] == len(got)
    assert -got.mean() == pytest.approx(static["nll"], rel=1e-5)

    # with the continuous cache (memory across sentences): evaluate --cache
    with_cache = _flat(scorer.score_document(lines, cache=CACHE))
    want_cache = cached_ev.evaluate(ids, CACHE)
    assert -with_cache.mean() == pytest.approx(want_cache["nll"], rel=1e-5)
    assert -with_cache.mean() != pytest.approx(static["nll"], rel=1e-4)

    # the same document, carried across sentences (a discourse-level
    # reading of the same weights), differs
    carried = Scorer.from_run(run, sentence_reset=None)
    other = _flat(carried.score_document(lines))
    assert not np.allclose(other, got, atol=1e-3)
    # the first line is scored from the initial state either way
    n0 = plain[0].num_tokens
    np.testing.assert_allclose(other[:n0], got[:n0], rtol=1e-5, atol=1e-6)


def _punctuation_stream(seed=0, lines=6):
    """Lines of several sentences ended by ``.``, ``!`` or ``?``."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(8)]
    vocab = Vocabulary(["<eos>", "<unk>", ".", "!", "?", *words])
    text = []
    for _ in range(lines):
        line = []
        for _ in range(rng.integers(1, 4)):
            line += [*rng.choice(words, rng.integers(1, 5))]
            line.append(str(rng.choice([".", "!", "?"])))
        text.append(" ".join(line))
    return vocab, text


@pytest.mark.parametrize("context", [None, CBOW], ids=["lstm", "cbow"])
def test_punctuation_rule_resets_inside_a_line(context):
    """WikiText's rule: a sentence also starts after ``.``, ``!``, ``?``
    inside a line; streamed in segments, with the cache."""
    vocab, lines = _punctuation_stream()
    cfg = ModelConfig(
        embedding_dim=5, hidden_sizes=[6], init_range=0.5, context=context
    )
    ref = build_language_model(cfg, len(vocab), None, stateful=False, seed=2)
    starts = functools.partial(sentence_starts, vocab=vocab, rule="punctuation")
    ids = _stream_ids(lines, vocab)
    ev = CacheEvaluator(cfg, len(vocab), 6, sentence_starts=starts)
    copy_weights(ref, ev.model)
    scorer = Scorer(ref, vocab, sentence_reset="punctuation")
    got = _flat(scorer.score_document(lines))
    want = ev.keyed_split(ids).vocab_log_probs
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    static = Evaluator(cfg, len(vocab), 1, 9, sentence_starts=starts)
    copy_weights(ref, static.model)
    assert -got.mean() == pytest.approx(static.evaluate(ids)["nll"], rel=1e-5)
    with_cache = _flat(scorer.score_document(lines, cache=CACHE))
    assert -with_cache.mean() == pytest.approx(
        ev.evaluate(ids, CACHE)["nll"], rel=1e-5
    )
    # a line rule (no reset inside a line) differs
    by_line = Scorer(ref, vocab, sentence_reset="line")
    assert not np.allclose(_flat(by_line.score_document(lines)), got)


def test_continue_in_segments_equals_the_document():
    """Segments cut anywhere (inside a sentence, at its end) score as the
    whole document: the reset is read from the input token."""
    vocab, lines = _punctuation_stream(seed=1)
    cfg = ModelConfig(embedding_dim=5, hidden_sizes=[6], init_range=0.5)
    ref = build_language_model(cfg, len(vocab), None, stateful=False, seed=3)
    scorer = Scorer(ref, vocab, sentence_reset="punctuation")
    whole = _flat(scorer.score_document([" ".join(lines)]))
    tokens = " ".join(lines).split() + ["<eos>"]
    state, parts = scorer.begin(), []
    for a in range(0, len(tokens), 3):
        state, r = scorer.continue_(state, tokens[a : a + 3])
        parts.append(r.ln_probs)
    np.testing.assert_allclose(np.concatenate(parts), whole, atol=1e-5)


def test_run_sentence_rule(tmp_path, tiny_corpus_dir):
    assert run_sentence_rule(_run_config("wikitext2")) == "punctuation"
    assert run_sentence_rule(_run_config("wikitext-2")) == "punctuation"
    assert run_sentence_rule(_run_config("ptb")) == "line"
    assert run_sentence_rule(_run_config(tiny_corpus_dir)) == "line"
    assert run_sentence_rule(_run_config("wikitext2", "epoch")) is None


def test_sentence_reset_is_checked():
    vocab = Vocabulary(["<eos>", "<unk>", "a"])
    cfg = ModelConfig(embedding_dim=4, hidden_sizes=[4])
    model = build_language_model(cfg, len(vocab), None, stateful=False)
    with pytest.raises(ValueError, match="sentence_reset"):
        Scorer(model, vocab, sentence_reset="sentence")


def test_cli_score_document_of_a_sentence_level_run(
    tiny_corpus_dir, tmp_path, capsys
):
    """``keras-rnnlm score RUN FILE --document --cache ...`` on a
    sentence-level run: the cache evaluator's perplexity."""
    import json

    from keras_rnnlm.cli.main import main
    from keras_rnnlm.runs import sentence_starts_of

    config = _run_config(tiny_corpus_dir, context=CBOW, out=tmp_path)
    run, corpus = write_random_run(config, tmp_path / "run")
    lines = _document(tiny_corpus_dir, n=8)
    path = tmp_path / "doc.txt"
    path.write_text("\n".join(lines) + "\n")
    args = ["score", run, str(path), "--json", "--document"]
    assert main(args + ["--cache", "window=20,theta=0.5,lambda=0.3"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    summary = rows[-1]["summary"]
    ev = CacheEvaluator(
        config.model,
        len(corpus.vocab),
        5,
        sentence_starts=sentence_starts_of(corpus),
    )
    ev.load_weights(os.path.join(run, "best.weights.h5"))
    want = ev.evaluate(_stream_ids(lines, corpus.vocab), CACHE)
    assert summary["tokens"] == want["tokens"]
    assert summary["perplexity"] == pytest.approx(want["ppl"], rel=1e-4)
