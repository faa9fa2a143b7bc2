"""SavedModelScorer and Scorer: one input contract, equal results
(the same errors, the same handling of lone surrogates)."""

import json

import numpy as np
import pytest
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from keras_rnnlm.scoring import Scorer
from keras_rnnlm.scoring.loading import SavedModelScorer

# One export (~20 s on a loaded CPU) and a property test: slow.
pytestmark = pytest.mark.slow

TOL = 1e-4  # float32 graph vs float32 Python scorer (ln-prob per token)


@pytest.fixture(scope="module")
def scorers(tiny_run, tmp_path_factory):
    from keras_rnnlm.export import export_saved_model

    path = tmp_path_factory.mktemp("contract") / "lm" / "1"
    export_saved_model(tiny_run, str(path))
    return Scorer.from_run(tiny_run), SavedModelScorer(str(path))


def _assert_equal(a, b):
    assert a.tokens == b.tokens
    assert a.oov == b.oov
    np.testing.assert_allclose(a.ln_probs, b.ln_probs, atol=TOL)


def _outcome(scorer, call):
    try:
        return call(scorer)
    except Exception as e:  # noqa: BLE001 - the type is what is compared
        return type(e)


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.score_sentences([None]),
        lambda s: s.score_sentences(["ok", 3]),
        lambda s: s.score_sentences("a single string"),
        lambda s: s.score_sentences(None),
        lambda s: s.score(None),
        lambda s: s.score(7),
        lambda s: s.perplexity(["a list"]),
    ],
)
def test_same_exception_types(scorers, call):
    keras_, saved = scorers
    assert _outcome(keras_, call) is TypeError
    assert _outcome(saved, call) is TypeError


def test_surrogates_nul_and_control_characters(scorers):
    keras_, saved = scorers
    sentences = [
        "the \ud800 cat",  # a lone surrogate: OOV, as U+FFFD
        "the \x00 cat\x00",
        "the\tcat\rsees\x1ca ball",
        b"the \xff\xfe cat",
        "",
    ]
    for s in sentences:
        a = keras_.score_sentences([s])[0]
        _assert_equal(a, saved.score_sentences([s])[0])
    assert keras_.score_sentences(["the \ud800 cat"])[0].num_oov == 1
    # any iterable of sentences
    _assert_equal(
        keras_.score_sentences(iter(["a dog"]))[0],
        saved.score_sentences(iter(["a dog"]))[0],
    )


_SENTENCE = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=()), max_size=24),
    st.binary(max_size=24),
    st.lists(
        st.sampled_from(["the", "cat", "sees", "a", "ball", ".", "dog"]),
        max_size=8,
    ).map(" ".join),
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.lists(_SENTENCE, min_size=1, max_size=4))
def test_random_unicode_and_bytes_score_the_same(scorers, sentences):
    """Random Unicode (surrogates and control characters included) and
    random bytes: equal results, never a crash."""
    keras_, saved = scorers
    for a, b in zip(
        keras_.score_sentences(sentences), saved.score_sentences(sentences)
    ):
        _assert_equal(a, b)
        assert np.all(np.isfinite(a.ln_probs))


def test_a_line_over_the_export_budget_is_scored_in_windows(
    scorers, tiny_run, tmp_path, capsys
):
    """A line longer than the export's token budget (8192) is scored
    through its initial_state / step signatures, in windows, the state
    carried: the Scorer's scores; from the CLI too, the other lines
    scored as well."""
    from keras_rnnlm.cli import main

    keras_, saved = scorers
    long = " ".join(["the cat sees a zebra ."] * 1700)  # 10,200 tokens
    lines = ["a dog likes the tree .", long, "", "my friend eats"]
    for a, b in zip(
        keras_.score_sentences(lines), saved.score_sentences(lines)
    ):
        _assert_equal(a, b)
    path = tmp_path / "longline.txt"
    path.write_text("\n".join(lines) + "\n")
    rows = {}
    for model in (saved.path, tiny_run):
        assert main(["score", model, str(path), "--json"]) == 0
        out = capsys.readouterr().out.splitlines()
        rows[model] = [json.loads(x) for x in out]
    assert len(rows[saved.path]) == len(lines) + 1
    for a, b in zip(rows[saved.path][:-1], rows[tiny_run][:-1]):
        assert a["num_tokens"] == b["num_tokens"]
        assert a["log10_prob"] == pytest.approx(b["log10_prob"], rel=1e-5)
