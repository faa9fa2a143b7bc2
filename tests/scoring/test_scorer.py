import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from keras_rnnlm.config import ModelConfig
from keras_rnnlm.data import Vocabulary
from keras_rnnlm.data.errors import OOVError
from keras_rnnlm.models import build_language_model
from keras_rnnlm.models import copy_weights
from keras_rnnlm.scoring import Scorer
from keras_rnnlm.scoring import Tokenization
from keras_rnnlm.scoring import build_inference_model
from keras_rnnlm.scoring.scorer import token_log_probs

SENT = "the cat sees a ball ."


def test_sum_of_full_scores_is_score(tiny_scorer):
    for s in [SENT, "a dog finds the tree .", "the zebra eats"]:
        for bos in (True, False):
            for eos in (True, False):
                fs = tiny_scorer.full_scores(s, bos=bos, eos=eos)
                total = tiny_scorer.score(s, bos=bos, eos=eos)
                assert sum(p for p, _ in fs) == pytest.approx(total, abs=1e-9)
    words = SENT.split()
    assert len(tiny_scorer.full_scores(SENT)) == len(words) + 1
    assert len(tiny_scorer.full_scores(SENT, eos=False)) == len(words)
    # bos=False: the first word is context only.
    assert len(tiny_scorer.full_scores(SENT, bos=False)) == len(words)


def test_log_bases_and_perplexity(tiny_scorer):
    log10 = tiny_scorer.score(SENT)
    ln = tiny_scorer.score(SENT, natural_log=True)
    assert ln == pytest.approx(log10 * math.log(10), rel=1e-9)
    n = len(SENT.split()) + 1
    assert tiny_scorer.perplexity(SENT) == pytest.approx(10 ** (-log10 / n))
    # The model learned the grammar: a grammatical sentence beats a shuffle.
    assert log10 > tiny_scorer.score("ball the a cat . sees") + 2


def test_probabilities_are_normalised(tiny_scorer):
    # Sum over every vocabulary token of p(token | "<eos> the") is 1.
    vocab = tiny_scorer.vocab
    total = sum(
        10 ** tiny_scorer.full_scores(f"the {t}", eos=False)[-1][0]
        for t in vocab.tokens
    )
    assert total == pytest.approx(1.0, abs=1e-4)


def test_oov_flagged_and_mapped_to_unk(tiny_scorer):
    fs = tiny_scorer.full_scores("the zebra sees a ball .")
    assert [o for _, o in fs] == [
        False,
        True,
        False,
        False,
        False,
        False,
        False,
    ]
    unk = tiny_scorer.full_scores("the <unk> sees a ball .")
    # Same probability as <unk> (the token it maps to), but not flagged.
    assert fs[1][0] == pytest.approx(unk[1][0])
    assert not unk[1][1]
    r = tiny_scorer.score_sentences(["zebra okapi"])[0]
    assert r.num_oov == 2 and r.to_dict()["oov_tokens"] == ["zebra", "okapi"]


def test_batched_equals_single(tiny_scorer):
    sents = [SENT, "", "a dog", "my friend eats some food .", "x " * 40]
    batch = tiny_scorer.score_batch(sents)
    single = [tiny_scorer.score(s) for s in sents]
    np.testing.assert_allclose(batch, single, atol=1e-5)
    small = Scorer(tiny_scorer.inference, tiny_scorer.vocab, batch_size=2)
    np.testing.assert_allclose(small.score_batch(sents), single, atol=1e-5)


def test_streaming_segments_equal_whole(tiny_scorer):
    doc = "the cat sees a ball . a dog likes the tree ."
    whole = tiny_scorer.full_scores(doc)
    state = tiny_scorer.begin()
    parts = []
    for seg in ["the cat", "sees a ball", ".", "", "a dog likes", "the tree ."]:
        state, r = tiny_scorer.continue_(state, seg)
        parts.extend(r.full_scores())
    state, r = tiny_scorer.continue_(state, "", eos=True)
    parts.extend(r.full_scores())
    np.testing.assert_allclose(
        [p for p, _ in parts], [p for p, _ in whole], atol=1e-5
    )
    # bos=False streams: the first token is context only, as in score().
    state = tiny_scorer.begin(bos=False)
    state, r1 = tiny_scorer.continue_(state, "the cat")
    state, r2 = tiny_scorer.continue_(state, "sees a ball .", eos=True)
    assert r1.log10_prob + r2.log10_prob == pytest.approx(
        tiny_scorer.score(SENT, bos=False), abs=1e-5
    )


@pytest.mark.slow
def test_stream_equals_evaluator_on_test_split(tiny_scorer, tiny_corpus_dir):
    # Streaming the whole test split (one <eos> per line, the first token
    # as context) is the evaluator's batch-1 stream: same perplexity.
    from keras_rnnlm.evaluation import Evaluator
    from keras_rnnlm.runs import load_run_corpus

    config = tiny_scorer.config
    corpus = load_run_corpus(config, tiny_scorer.vocab)
    ev = Evaluator(config.model, len(tiny_scorer.vocab), 1, 35)
    ref = ev.evaluate(corpus.test, weights_from=tiny_scorer.model)
    with open(os.path.join(tiny_corpus_dir, "test.txt")) as f:
        lines = f.read().splitlines()
    state = tiny_scorer.begin(bos=False)
    ln, n = 0.0, 0
    for line in lines:
        state, r = tiny_scorer.continue_(state, line, eos=True)
        ln += r.ln_prob
        n += r.num_tokens
    assert n == ref["tokens"]
    assert math.exp(-ln / n) == pytest.approx(ref["ppl"], rel=1e-4)


def test_corpus_perplexity(tiny_scorer):
    sents = [SENT, "a dog likes a ball ."]
    rs = tiny_scorer.score_sentences(sents)
    n = sum(r.num_tokens for r in rs)
    expected = 10 ** (-sum(r.log10_prob for r in rs) / n)
    assert tiny_scorer.corpus_perplexity(sents) == pytest.approx(expected)


def test_bad_input(tiny_scorer):
    # Empty and whitespace-only lines: the probability of <eos>.
    e = tiny_scorer.score_sentences(["", "   \t ", "\n"])
    assert [r.num_tokens for r in e] == [1, 1, 1]
    assert e[0].log10_prob == pytest.approx(e[1].log10_prob)
    assert e[0].log10_prob < 0
    # Nothing to score.
    assert tiny_scorer.score("", bos=False, eos=False) == 0.0
    with pytest.raises(ValueError, match="Nothing was scored"):
        tiny_scorer.perplexity("", bos=False, eos=False)
    # Non-UTF-8 bytes become U+FFFD (an OOV token), never a crash.
    r = tiny_scorer.score_sentences([b"the \xff\xfe cat"])[0]
    assert r.num_oov == 1 and r.tokens[1] == "\ufffd\ufffd"
    with pytest.raises(TypeError):
        tiny_scorer.score(12)
    with pytest.raises(TypeError):
        tiny_scorer.score_sentences("a single string")
    # A sentence longer than any training window.
    long = " ".join([SENT] * 40)
    fs = tiny_scorer.full_scores(long)
    assert len(fs) == 6 * 40 + 1 and all(np.isfinite(p) for p, _ in fs)


def test_missing_run_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="No such file or directory"):
        Scorer.from_run(str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError, match="no config.json"):
        Scorer.from_run(str(tmp_path))


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.text(max_size=40))
def test_random_strings(tiny_scorer, text):
    r = tiny_scorer.score_sentences([text])[0]
    assert r.num_tokens == len(text.split()) + 1
    assert np.all(np.isfinite(r.ln_probs)) and np.all(r.ln_probs <= 0)
    assert r.log10_prob == pytest.approx(sum(p for p, _ in r.full_scores()))


def test_char_level_scores_characters():
    vocab = Vocabulary(list("abc_") + ["<eos>"], unk_token=None)
    cfg = ModelConfig(
        embedding_dim=4, input_encoding="one_hot", hidden_sizes=[8]
    )
    model = build_language_model(cfg, len(vocab), None, stateful=False, seed=0)
    scorer = Scorer(model, vocab, Tokenization("chars", space_token="_"))
    fs = scorer.full_scores("ab  c")
    assert len(fs) == len("ab_c") + 1
    assert scorer.encode("  ab  c ")[0] == ["a", "b", "_", "c"]
    # A closed alphabet has no <unk>: an unknown character is an error.
    with pytest.raises(OOVError, match="no unknown token"):
        scorer.score("abd")
    raw = Scorer(model, vocab, Tokenization("chars"))
    assert raw.encode("a_b")[0] == ["a", "_", "b"]


def _check_head_at_positions(inf, x, ref):
    """The head runs at the asked positions only, with the same logits."""
    assert tuple(inf.model.outputs[0].shape)[:2] == (1, None)
    b, t = x.shape
    positions = np.array([0, t - 1, t, b * t - 2], "int32")
    got, _ = inf.at_positions(x, positions, inf.initial_states(b))
    flat = np.asarray(ref).reshape(b * t, -1)
    np.testing.assert_allclose(np.asarray(got), flat[positions], atol=1e-5)
    y = np.roll(x, -1, axis=1)
    full, _ = token_log_probs(inf, x, y, inf.initial_states(b))
    part, _ = token_log_probs(inf, x, y, inf.initial_states(b), positions)
    expect = np.zeros(b * t, "float32")
    expect[positions] = np.asarray(full).reshape(-1)[positions]
    np.testing.assert_allclose(np.asarray(part).reshape(-1), expect, atol=1e-5)


_MULTICELL = dict(num_cells=3, strategy="min_max", initial_cells="linspace")


@pytest.mark.parametrize(
    "cell,kwargs",
    [
        ("gru", {}),
        pytest.param("mlstm", {}, marks=pytest.mark.slow),
        ("multicell_lstm", _MULTICELL),
    ],
    ids=["gru", "mlstm", "multicell_lstm"],
)
def test_inference_model_for_other_cells(cell, kwargs):
    """Streaming in two segments equals one pass, for the multiplicative
    and multi-cell layers too (a multi-cell state holds all m cells; with
    distinct initial cells the carried cells matter)."""
    cfg = ModelConfig(
        embedding_dim=8, hidden_sizes=[8], cell=cell, cell_kwargs=kwargs
    )
    model = build_language_model(cfg, 12, None, stateful=False, seed=0)
    inf = build_inference_model(model)
    x = np.random.default_rng(0).integers(0, 12, (2, 9)).astype("int32")
    ref = np.asarray(model(x))
    whole, _ = inf(x, inf.initial_states(2))
    a, s = inf(x[:, :4], inf.initial_states(2))
    b, _ = inf(x[:, 4:], s)
    np.testing.assert_allclose(np.asarray(whole), ref, atol=1e-6)
    np.testing.assert_allclose(
        np.concatenate([np.asarray(a), np.asarray(b)], 1), ref, atol=1e-5
    )
    _check_head_at_positions(inf, x, ref)


def test_stateful_model_rejected():
    cfg = ModelConfig(embedding_dim=8, hidden_sizes=[8])
    model = build_language_model(cfg, 12, 2, stateful=True, seed=0)
    with pytest.raises(ValueError, match="stateful"):
        build_inference_model(model)


def test_a_stateful_source_and_its_weights_followed():
    """An Evaluator's stateful model gives a stateless twin graph (its
    state variables in no graph), whose recurrent copies follow the
    source's weights on update_weights()."""
    cfg = ModelConfig(embedding_dim=8, hidden_sizes=[8, 6])
    model = build_language_model(cfg, 12, 2, stateful=True, seed=0)
    stateless = build_language_model(cfg, 12, None, stateful=False, seed=5)
    inf = build_inference_model(model, stateful_source=True)
    x = np.array([[1, 2, 3], [4, 5, 6]], "int32")

    def logits():
        out, _ = inf(x, inf.initial_states(2))
        return np.asarray(out)

    before = logits()
    copy_weights(stateless, model)
    expected = np.asarray(stateless(x))
    assert not np.allclose(logits(), expected)  # the old copies
    inf.update_weights()
    np.testing.assert_allclose(logits(), expected, atol=1e-6)
    assert not np.allclose(logits(), before)


_AWD = dict(
    embedding_dim=8,
    hidden_sizes=[12, 8],
    locked_dropout=True,
    dropout=0.4,
    dropouth=0.25,
    dropouti=0.4,
    dropoute=0.1,
    dropoutl=0.3,
)


@pytest.mark.parametrize(
    "extra",
    [
        dict(head="tied", weight_dropout=0.5, ar_alpha=2.0, tar_beta=1.0),
        pytest.param(
            dict(head="mos", mixture_components=3), marks=pytest.mark.slow
        ),
        pytest.param(
            dict(head="doc", mixture_components=[1, 2, 3]),
            marks=pytest.mark.slow,
        ),
    ],
    ids=["awd_lstm", "mos", "doc"],
)
def test_inference_model_for_awd_family(extra):
    """The generic inference graph also covers the AWD-LSTM family
    (weight drop, locked/embedding dropout, MoS and DOC heads)."""
    cfg = ModelConfig(**_AWD, **extra)
    model = build_language_model(cfg, 20, None, stateful=False, seed=1)
    inf = build_inference_model(model)
    x = np.random.default_rng(0).integers(0, 20, (2, 7)).astype("int32")
    ref = np.asarray(model(x, training=False))
    a, s = inf(x[:, :3], inf.initial_states(2))
    b, _ = inf(x[:, 3:], s)
    np.testing.assert_allclose(
        np.concatenate([np.asarray(a), np.asarray(b)], 1), ref, atol=1e-5
    )
    _check_head_at_positions(inf, x, ref)
    vocab = Vocabulary([f"w{i}" for i in range(19)] + ["<eos>"])
    scorer = Scorer(inf, vocab)
    fs = scorer.full_scores("w1 w2 w3")
    assert sum(p for p, _ in fs) == pytest.approx(scorer.score("w1 w2 w3"))
