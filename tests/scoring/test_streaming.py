"""Streaming scoring: bounded chunks in input order, windows of a bounded
length for a long sentence (the state, CBOW context and cache carried),
the same log-probabilities as scoring whole; ``keras-rnnlm score`` in
memory that does not grow with its input."""

import itertools
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from run_dirs import write_random_run

from keras_rnnlm.cache_pointer import CacheConfig
from keras_rnnlm.config import ModelConfig
from keras_rnnlm.config import RunConfig
from keras_rnnlm.data.errors import OOVError
from keras_rnnlm.data.vocabulary import Vocabulary
from keras_rnnlm.models import build_language_model
from keras_rnnlm.scoring import Scorer
from keras_rnnlm.scoring.streaming import POOL_BATCHES
from keras_rnnlm.scoring.streaming import TokenBudget
from keras_rnnlm.scoring.streaming import UnscoredLine
from keras_rnnlm.scoring.streaming import padded_count

SENT = "the cat sees a ball ."
LONG = " ".join([SENT] * 50)  # 300 words


def _bounded(scorer, tokens, **kwargs):
    return Scorer(
        scorer.inference,
        scorer.vocab,
        scorer.tokenization,
        max_batch_tokens=tokens,
        **kwargs,
    )


def test_a_long_sentence_is_scored_in_windows(tiny_scorer):
    small = _bounded(tiny_scorer, 16)
    assert small.max_batch_tokens == 16
    for bos, eos in ((True, True), (False, True), (True, False)):
        want = tiny_scorer.full_scores(LONG, bos=bos, eos=eos)
        got = small.full_scores(LONG, bos=bos, eos=eos)
        assert len(got) == len(want)
        np.testing.assert_allclose(got, want, atol=1e-5)
    batch = [SENT, LONG, "", "a dog", LONG + " the"]
    np.testing.assert_allclose(
        small.score_batch(batch), tiny_scorer.score_batch(batch), atol=1e-4
    )


def test_iter_scores_reads_a_bounded_chunk_ahead(tiny_scorer):
    """The first scores come after a pool of about POOL_BATCHES budgets
    of tokens, not at the end of the input (here: an endless one)."""
    read = []

    def lines():
        for i in itertools.count():
            read.append(i)
            yield SENT

    small = _bounded(tiny_scorer, 32)
    first = list(itertools.islice(small.iter_scores(lines()), 7))
    assert len(read) <= POOL_BATCHES * 32 // 7 + 2  # 7 tokens a line
    want = tiny_scorer.score(SENT, natural_log=True)
    np.testing.assert_allclose([r.ln_prob for r in first], want, atol=1e-4)


def test_budget_batches_and_windows():
    budget = TokenBudget(100, max_rows=8)
    steps = [5, 90, 30, 7, 12, 33, 1, 64, 4]
    batches = budget.batches(steps)
    assert sorted(i for b in batches for i in b) == list(range(len(steps)))
    for b in batches:
        assert len(b) <= 8
        assert len(b) * budget.padded(max(steps[i] for i in b)) <= 100
    assert budget.windows(250) == [(0, 100), (100, 200), (200, 250)]
    assert budget.fits(96) and not budget.fits(99)  # 99 pads to 112
    assert [budget.padded_rows(r, 12) for r in (1, 3, 5, 8)] == [1, 4, 8, 8]
    assert budget.padded_rows(5, 32) == 5  # 8 x 32 is over the budget
    assert [padded_count(n) for n in (1, 17, 100, 4000)] == [16, 32, 112, 4096]
    with pytest.raises(ValueError, match="max_batch_tokens"):
        TokenBudget(0)


def test_passes_have_a_bounded_set_of_shapes(tiny_scorer, monkeypatch):
    """Many sentences of every length: the passes' shapes (rows x width,
    and the positions the head runs at) come from a small set, however
    long the input (each new shape is a compiled program kept in
    memory)."""
    small = _bounded(tiny_scorer, 64, batch_size=8)
    shapes = set()
    fn = small._fn

    def recording(x, y, states, *positions):
        shapes.add((x.shape, len(positions[0]) if positions else x.size))
        return fn(x, y, states, *positions)

    monkeypatch.setattr(small, "_fn", recording)
    rng = np.random.default_rng(0)
    words = SENT.split()
    lines = [" ".join(rng.choice(words, n)) for n in rng.integers(0, 40, 400)]
    got = small.score_batch(lines)
    np.testing.assert_allclose(got, tiny_scorer.score_batch(lines), atol=1e-4)
    for (rows, width), n in shapes:
        assert rows * width <= 64
        assert rows in (1, 2, 4, 8) or rows == 64 // width, (rows, width)
        assert n in (16, 32, 48, 64), n


def _cbow_stream():
    words = [f"w{i}" for i in range(8)]
    vocab = Vocabulary(["<eos>", "<unk>", ".", *words])
    rng = np.random.default_rng(3)
    lines = [" ".join(rng.choice([*words, "."], n)) for n in (40, 3, 0, 90, 7)]
    cfg = ModelConfig(
        embedding_dim=5,
        hidden_sizes=[6, 4],
        init_range=0.5,
        context={"weighting": "positional", "window": 6},
    )
    model = build_language_model(cfg, len(vocab), None, stateful=False)
    return model, vocab, lines


@pytest.mark.parametrize("reset", [None, "punctuation"])
def test_document_windows_carry_state_context_and_cache(reset):
    """A document whose lines are longer than the budget: windows of 4
    tokens, the recurrent state, the CBOW context and the cache carried,
    give the document's scores (sentence resets read as in whole)."""
    model, vocab, lines = _cbow_stream()
    whole = Scorer(model, vocab, sentence_reset=reset)
    small = Scorer(model, vocab, sentence_reset=reset, max_batch_tokens=4)
    cache = CacheConfig(20, 0.5, 0.3)
    for c in (None, cache):
        want = whole.score_document(lines, cache=c)
        got = list(small.iter_scores(iter(lines), document=True, cache=c))
        assert [r.num_tokens for r in got] == [r.num_tokens for r in want]
        np.testing.assert_allclose(
            np.concatenate([r.ln_probs for r in got]),
            np.concatenate([r.ln_probs for r in want]),
            atol=1e-5,
        )


def test_unscorable_lines_reported_in_place():
    """errors="report": a line the model cannot score (an unknown
    character of a closed alphabet) is an :class:`UnscoredLine` in its
    place, and the rest are scored; the default raises."""
    vocab = Vocabulary(list("ab ") + ["<eos>"], unk_token=None)
    cfg = ModelConfig(embedding_dim=4, hidden_sizes=[4])
    model = build_language_model(cfg, len(vocab), None, stateful=False)
    from keras_rnnlm.scoring import Tokenization

    scorer = Scorer(model, vocab, Tokenization("chars"))
    lines = ["ab", "abz", "ba"]
    for document in (False, True):
        out = list(
            scorer.iter_scores(lines, errors="report", document=document)
        )
        assert isinstance(out[1], UnscoredLine)
        assert "'z'" in out[1].message
        assert [r.num_tokens for r in (out[0], out[2])] == [3, 3]
        with pytest.raises(OOVError):
            list(scorer.iter_scores(lines, document=document))


# -- keras-rnnlm score in bounded memory (fresh processes) -----------------

_WORDS = 2000  # the vocabulary: a (tokens x vocabulary) tensor is large


def _big_vocab_run(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    words = [f"w{i}" for i in range(_WORDS)]
    text = "\n".join(" ".join(words[i : i + 20]) for i in range(0, _WORDS, 20))
    for split in ("train", "valid", "test"):
        (corpus / f"{split}.txt").write_text(text + "\n")
    config = RunConfig.from_dict(
        {
            "name": "big_vocab",
            "data": {"corpus": str(corpus), "level": "word"},
            "model": {"embedding_dim": 8, "hidden_sizes": [8]},
            "train": {"out_dir": str(tmp_path / "out")},
        }
    )
    run, _ = write_random_run(config, tmp_path / "run")
    return run


def _peak_rss_mb(args):
    """Peak RSS of ``python -m keras_rnnlm.cli ARGS`` (its own rusage)."""
    p = subprocess.Popen(
        [sys.executable, "-m", "keras_rnnlm.cli", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode()
    p.stderr.close()
    assert p.returncode == 0, err
    return usage.ru_maxrss / 1024


@pytest.mark.slow  # two fresh processes (TensorFlow's import each)
def test_cli_memory_does_not_grow_with_a_line(tmp_path):
    run = _big_vocab_run(tmp_path)
    rng = np.random.default_rng(0)
    peaks = []
    for n in (2_000, 40_000):
        path = tmp_path / f"line_{n}.txt"
        path.write_text(" ".join(f"w{i}" for i in rng.integers(0, _WORDS, n)))
        peaks.append(_peak_rss_mb(["score", run, str(path)]))
    # whole: 40k x 2000 float32 logits alone are 320 MB
    assert peaks[1] - peaks[0] < 120, peaks


@pytest.mark.slow  # a fresh process (TensorFlow's import)
def test_cli_prints_before_the_input_ends(tiny_run):
    """Lines on a pipe that stays open: scores come out as chunks are
    scored, not at the end of the input."""
    p = subprocess.Popen(
        [sys.executable, "-m", "keras_rnnlm.cli", "score", tiny_run],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    done = threading.Event()

    def write():
        p.stdin.write(f"{SENT}\n".encode() * 8000)
        p.stdin.flush()
        done.wait(300)
        p.stdin.close()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    first = []
    reader = threading.Thread(
        target=lambda: first.append(p.stdout.readline()), daemon=True
    )
    reader.start()
    reader.join(120)
    before_end = list(first)
    done.set()
    p.stdout.read()
    p.wait(120)
    assert before_end, "no output before the end of the input"
    assert before_end[0].decode().endswith(f"\t{SENT}\n"), before_end
    assert p.returncode == 0
