"""The export's ``generate`` signature against the run it was exported
from: ``LanguageModel.from_export(...).generate`` gives the tokens, text
and stop reasons of ``LanguageModel.from_run(...).generate`` for the
same arguments and seed (its log-probabilities within 1e-4), for a
word-level LSTM, a character-level mLSTM, a CBOW context and a
sentence-level run; another seed gives another text."""

import numpy as np
import pytest
from test_families import CHAR_FAMILIES
from test_families import CHAR_PROMPTS
from test_families import WORD_FAMILIES
from test_families import WORD_PROMPTS
from test_families import _run
from test_families import tiny_char_corpus_dir  # noqa: F401  (a fixture)

from keras_rnnlm import LanguageModel
from keras_rnnlm.generation import RandomSampler
from keras_rnnlm.generation import TopKSampler
from keras_rnnlm.generation import TopPSampler

#: the samplers and arguments compared, each with its seed
CASES = [
    {"sampler": "greedy", "seed": 0},
    {"sampler": RandomSampler(1.3), "seed": 4, "num_samples": 2},
    {"sampler": TopKSampler(3, temperature=0.9), "seed": 5},
    {"sampler": TopPSampler(0.8, temperature=1.2), "seed": 6},
    {"sampler": TopPSampler(0.95, k=4), "seed": 7, "stop_token": None},
]
#: the cases of a family whose own part is its state or tokenization
#: (each sampler compiles a loop of its own: every one runs on the word
#: LSTM, a filtered and an unfiltered one here)
FAMILY_CASES = [CASES[0], CASES[3]]


def _flat(results):
    out = []
    for r in results:
        out += r if isinstance(r, list) else [r]
    return out


def assert_same_generations(got, want):
    """Equal continuations (text, tokens, ids, finish reason, seed), the
    log-probabilities within 1e-4."""
    got, want = _flat(got), _flat(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert (g.prompt, g.text, g.tokens, g.token_ids) == (
            w.prompt,
            w.text,
            w.tokens,
            w.token_ids,
        )
        assert (g.finish_reason, g.seed) == (w.finish_reason, w.seed)
        np.testing.assert_allclose(g.log_probs, w.log_probs, atol=1e-4)


def _check_export(lm, prompts, tmp_path, max_tokens=12, cases=CASES):
    path = lm.export(str(tmp_path / "lm" / "1"), warmup=False)
    exported = LanguageModel.from_export(path)
    for kwargs in cases:
        want = lm.generate(prompts, max_tokens, details=True, **kwargs)
        got = exported.generate(prompts, max_tokens, details=True, **kwargs)
        assert_same_generations(got, want)
    sampler = RandomSampler(1.5)
    a = exported.generate(prompts, max_tokens, sampler, seed=11)
    assert a == lm.generate(prompts, max_tokens, sampler, seed=11)
    assert a != exported.generate(prompts, max_tokens, sampler, seed=12)
    return exported


@pytest.mark.slow
def test_word_level_lstm(tiny_corpus_dir, tmp_path):
    run_dir = _run(tmp_path, tiny_corpus_dir, WORD_FAMILIES["zaremba_lstm"])
    lm = LanguageModel.from_run(run_dir)
    exported = _check_export(lm, WORD_PROMPTS, tmp_path)
    # out-of-vocabulary words are <unk>, as in the run
    kwargs = {"sampler": "random", "seed": 2, "details": True}
    prompt = "the zebra sees"
    assert_same_generations(
        exported.generate([prompt], 6, **kwargs),
        lm.generate([prompt], 6, **kwargs),
    )


@pytest.mark.slow
def test_character_level_mlstm(tiny_char_corpus_dir, tmp_path):  # noqa: F811
    run_dir = _run(
        tmp_path, tiny_char_corpus_dir, CHAR_FAMILIES["mlstm"], level="char"
    )
    lm = LanguageModel.from_run(run_dir)
    assert lm.scorer.tokenization.mode == "chars"
    exported = _check_export(
        lm, CHAR_PROMPTS, tmp_path, max_tokens=30, cases=FAMILY_CASES
    )
    # no stop token by default: <eos> is a line break of the text
    want = lm.generate("", 60, "random", seed=3, details=True)
    got = exported.generate("", 60, "random", seed=3, details=True)
    assert_same_generations([got], [want])
    assert got.finish_reason == "length" and "<eos>" in got.tokens


@pytest.mark.slow
def test_cbow_context(tiny_corpus_dir, tmp_path):
    run_dir = _run(tmp_path, tiny_corpus_dir, WORD_FAMILIES["cbow_context"])
    lm = LanguageModel.from_run(run_dir)
    assert "token_ids" in lm.scorer.inference.state_kinds
    _check_export(lm, WORD_PROMPTS, tmp_path, cases=FAMILY_CASES)


@pytest.mark.slow  # an export and five samplers: ~25 s on 2 cores
def test_sentence_level_run(tiny_corpus_dir, tmp_path):
    """The states reset before each sentence start, in the prompt and
    the continuation, in the export's graph too."""
    run_dir = _run(
        tmp_path,
        tiny_corpus_dir,
        WORD_FAMILIES["cbow_context"],
        data={"state_reset": "sentence"},
    )
    lm = LanguageModel.from_run(run_dir)
    assert lm.scorer.sentence_reset == "line"
    prompts = ["the cat . <eos> a dog <eos> my", "", "the bird <eos>"]
    _check_export(lm, prompts, tmp_path, max_tokens=20)
