"""Generation from a run directory of every model family, word- and
character-level: the greedy continuation is the argmax chain of
``next_token_logprobs`` (the scorer's streaming path), and the
log-probabilities it reports are those the batched scorer gives the
continuation (random weights: the checks hold on any weights)."""

import numpy as np
import pytest
from run_dirs import write_random_run
from tiny_configs import tiny_awd_doc_config
from tiny_configs import tiny_run_dict

from keras_rnnlm import LanguageModel
from keras_rnnlm.config import RunConfig
from keras_rnnlm.generation import RandomSampler

WORD_PROMPTS = ["the cat sees", "", "a dog likes the fish . my friend"]
CHAR_PROMPTS = ["the cat", "", "a dog likes the fish. my"]

#: model (and data) sections of each family, on the tiny run
WORD_FAMILIES = {
    "zaremba_lstm": {"init_range": 0.5},
    "awd_lstm_mos": {
        "embedding_dim": 8,
        "hidden_sizes": [16, 8],
        "head": "mos",
        "mixture_components": 3,
        "locked_dropout": True,
        "dropout": 0.4,
        "dropoutl": 0.3,
        "weight_dropout": 0.5,
        "rnn_init": "pytorch",
    },
    "mmlstm": {"cell": "mmlstm", "major_proportions": [0.5, 0.75]},
    "multicell_lstm": {
        "cell": "multicell_lstm",
        "cell_kwargs": {"num_cells": 3, "initial_cells": "linspace"},
    },
    "cbow_context": {"context": {"weighting": "positional", "window": 6}},
}
CHAR_FAMILIES = {
    "mlstm": {
        "input_encoding": "one_hot",
        "hidden_sizes": [16],
        "cell": "mlstm",
        "cell_kwargs": {"intermediate_size": 8},
        "init_range": None,
    },
    "mgru": {
        "input_encoding": "one_hot",
        "hidden_sizes": [16],
        "cell": "mgru",
        "init_range": None,
    },
}


@pytest.fixture(scope="session")
def tiny_char_corpus_dir(tiny_corpus_dir, tmp_path_factory):
    """The tiny corpus's text as a character-level corpus directory."""
    d = tmp_path_factory.mktemp("tiny_char_corpus")
    for split in ("train", "valid", "test"):
        with open(f"{tiny_corpus_dir}/{split}.txt") as f:
            text = f.read()
        (d / f"{split}.txt").write_text(text.replace(" .", "."))
    return str(d)


def _run(tmp_path, corpus, model, level="word", data=None):
    config = tiny_run_dict(corpus, tmp_path / "run", model=model)
    config["data"].update(level=level, **(data or {}))
    run_dir, _ = write_random_run(RunConfig.from_dict(config), tmp_path)
    return run_dir


def _check_generation(lm, prompts, join):
    """Greedy is the argmax chain of next_token_logprobs, with its
    log-probabilities; they are the scorer's (batched; streaming for a
    sentence-level run, whose batched scores read a line as one
    sentence); a random sampler's seed repeats its draws."""
    eos = lm.vocab.eos_token
    greedy = lm.generate(
        prompts, max_tokens=4, stop_token=eos, seed=0, details=True
    )
    for prompt, g in zip(prompts, greedy):
        assert g.finish_reason == ("stop" if len(g.tokens) < 4 else "length")
        text = prompt
        for token, token_id, lp in zip(g.tokens, g.token_ids, g.log_probs):
            ref = lm.next_token_logprobs(text)
            assert ref[token_id] >= ref.max() - 1e-5  # an argmax
            assert lp == pytest.approx(ref[token_id], abs=1e-4)
            text = join(text, token)
        n = len(g.tokens)
        if n and lm.scorer.sentence_reset is None:
            scores = lm.full_scores(text, eos=False, natural_log=True)
            want = [p for p, _ in scores[-n:]]
        elif n:
            _, r = lm.scorer.continue_(lm.scorer.begin(), text)
            want = r.ln_probs[-n:]
        if n:
            np.testing.assert_allclose(g.log_probs, want, atol=1e-4)
    sampler = RandomSampler(temperature=1.3)
    a = lm.generate(prompts, 8, sampler, seed=4, stop_token=None)
    assert a == lm.generate(prompts, 8, sampler, seed=4, stop_token=None)
    assert all(isinstance(t, str) for t in a)


def _join_words(text, token):
    return f"{text} {token}".strip()


def _join_chars(text, token):
    return text + token


#: 15 to 30 s each on 2 busy cores: in the slow run
SLOW = ("awd_lstm_mos", "mmlstm", "multicell_lstm", "mgru")


def _families(families):
    return [
        pytest.param(f, marks=pytest.mark.slow) if f in SLOW else f
        for f in sorted(families)
    ]


@pytest.mark.parametrize("family", _families(WORD_FAMILIES))
def test_word_level_family(family, tiny_corpus_dir, tmp_path):
    run_dir = _run(tmp_path, tiny_corpus_dir, WORD_FAMILIES[family])
    _check_generation(
        LanguageModel.from_run(run_dir), WORD_PROMPTS, _join_words
    )


def test_awd_lstm_doc(tiny_corpus_dir, tmp_path):
    config = tiny_awd_doc_config("doc", tiny_corpus_dir)
    config.train.out_dir = str(tmp_path / "run")
    run_dir, _ = write_random_run(config, tmp_path)
    _check_generation(
        LanguageModel.from_run(run_dir), WORD_PROMPTS, _join_words
    )


@pytest.mark.parametrize("family", _families(CHAR_FAMILIES))
def test_character_level_family(family, tiny_char_corpus_dir, tmp_path):
    run_dir = _run(
        tmp_path, tiny_char_corpus_dir, CHAR_FAMILIES[family], level="char"
    )
    lm = LanguageModel.from_run(run_dir)
    assert lm.scorer.tokenization.mode == "chars"
    _check_generation(lm, CHAR_PROMPTS, _join_chars)
    # no stop token unless given: max_tokens characters, <eos> a line break
    text = lm.generate("", max_tokens=40, sampler="random", seed=1)
    g = lm.generate("", 40, "random", seed=1, details=True)
    assert len(g.tokens) == 40 and g.finish_reason == "length"
    assert text == g.text and text.count("\n") == g.tokens.count("<eos>")


def test_sentence_level_run(tiny_corpus_dir, tmp_path):
    """A sentence-level run (state reset at each sentence start, in the
    prompt and the continuation) with a CBOW context carried across."""
    run_dir = _run(
        tmp_path,
        tiny_corpus_dir,
        WORD_FAMILIES["cbow_context"],
        data={"state_reset": "sentence"},
    )
    lm = LanguageModel.from_run(run_dir)
    assert lm.scorer.sentence_reset == "line"
    prompts = ["the cat . <eos> a dog <eos> my", "", "the bird <eos>"]
    _check_generation(lm, prompts, _join_words)
