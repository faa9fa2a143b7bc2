"""keras_rnnlm.LanguageModel on the shared tiny run (tests/conftest.py):
scoring is the scorer's, next-token distributions, generate's arguments
and results, the cache pointer, the export and the object from it."""

import json

import numpy as np
import pytest
from user_process import run_as_user

from keras_rnnlm import LanguageModel
from keras_rnnlm.cache_pointer import CacheConfig
from keras_rnnlm.generation import Generation
from keras_rnnlm.generation import GenerationError
from keras_rnnlm.generation import TopKSampler
from keras_rnnlm.generation.text import MAX_ROWS
from keras_rnnlm.generation.text import MAX_TOKENS_LIMIT
from keras_rnnlm.scoring import Scorer

SENTENCES = ["the cat sees a ball .", "my friend eats", ""]


@pytest.fixture(scope="module")
def lm(tiny_run):
    return LanguageModel.from_run(tiny_run)


def test_importing_the_package_does_not_import_the_language_model():
    code = (
        "import sys, keras_rnnlm\n"
        "print('keras_rnnlm.language_model' in sys.modules)\n"
        "print(keras_rnnlm.LanguageModel.__module__)\n"
    )
    p = run_as_user(["-c", code], timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["False", "keras_rnnlm.language_model"]


def test_scoring_is_the_scorers(lm, tiny_run):
    scorer = Scorer.from_run(tiny_run)
    for s in SENTENCES:
        assert lm.score(s) == pytest.approx(scorer.score(s), abs=1e-6)
        assert lm.perplexity(s) == pytest.approx(scorer.perplexity(s))
        got = lm.full_scores(s, bos=True, eos=True, natural_log=True)
        want = scorer.full_scores(s, natural_log=True)
        np.testing.assert_allclose(got, want, atol=1e-6)
    got = [r.ln_prob for r in lm.score_sentences(SENTENCES, eos=False)]
    want = scorer.score_batch(SENTENCES, eos=False, natural_log=True)
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_next_token_logprobs(lm):
    one = lm.next_token_logprobs("the cat")
    many = lm.next_token_logprobs(["the cat", ""])
    assert one.shape == (len(lm.vocab),) and many.shape == (2, len(lm.vocab))
    np.testing.assert_allclose(many[0], one, atol=1e-6)
    np.testing.assert_allclose(np.exp(many).sum(-1), 1.0, atol=1e-5)
    # the scorer's probability of the next word
    p = lm.full_scores("the cat sees", eos=False, natural_log=True)[-1][0]
    assert one[lm.vocab.token_to_id("sees")] == pytest.approx(p, abs=1e-5)
    # after "the", a noun of the grammar is likely
    best = lm.vocab.id_to_token(lm.next_token_logprobs("the").argmax())
    assert best in ("cat", "bird", "fish", "tree")


def test_generate_returns_text_as_its_prompts_come(lm):
    one = lm.generate("the cat", max_tokens=4)
    assert isinstance(one, str) and one == lm.generate(["the cat"], 4)[0]
    many = lm.generate(SENTENCES, 4, "random", seed=1, num_samples=3)
    assert [len(m) for m in many] == [3, 3, 3]
    assert all(isinstance(t, str) for m in many for t in m)
    g = lm.generate("the cat", 4, details=True, seed=5)
    assert isinstance(g, Generation) and g.seed == 5
    assert g.text == " ".join(g.tokens) and len(g.log_probs) == len(g.tokens)
    record = json.loads(json.dumps(g.to_dict()))
    assert record["tokens"] == g.tokens and record["prompt"] == "the cat"
    assert lm.generate([], 4) == []
    assert lm.generate("the cat", max_tokens=0) == ""


def test_a_word_level_model_stops_at_the_end_of_the_sentence(lm):
    """The trained tiny grammar ends every sentence with "." <eos>:
    greedy stops there (the stop token not in the text); without a
    stop token it goes on to max_tokens."""
    g = lm.generate("the cat sees", 10, details=True)
    assert g.finish_reason == "stop" and g.tokens[-1] == "."
    g = lm.generate("the cat sees", 10, stop_token=None, details=True)
    assert g.finish_reason == "length" and len(g.tokens) == 10
    assert "\n" in g.text  # <eos> is a line break in the text
    g = lm.generate("the cat sees", 10, stop_token=".", details=True)
    assert g.finish_reason == "stop" and "." not in g.tokens


def test_greedy_is_the_argmax_chain_of_next_token_logprobs(lm):
    for prompt in SENTENCES:
        g = lm.generate(prompt, 6, stop_token=None, details=True)
        text = prompt
        for token, lp in zip(g.tokens, g.log_probs):
            ref = lm.next_token_logprobs(text)
            assert lm.vocab.id_to_token(ref.argmax()) == token
            assert lp == pytest.approx(ref.max(), abs=1e-4)
            text = f"{text} {token}"


def test_same_seed_same_text_other_seed_other_text(lm):
    args = dict(max_tokens=12, sampler=TopKSampler(5, 1.5), num_samples=4)
    a = lm.generate(SENTENCES, seed=3, **args)
    assert a == lm.generate(SENTENCES, seed=3, **args)
    assert a != lm.generate(SENTENCES, seed=4, **args)
    # a fresh seed without one, reported
    g = lm.generate("the", 3, "random", details=True)
    assert lm.generate("the", 3, "random", seed=g.seed) == g.text


def test_an_out_of_vocabulary_word_is_unk(lm):
    assert "zebra" not in lm.vocab and lm.vocab.unk_id is not None
    args = dict(max_tokens=6, sampler="random", seed=2, details=True)
    a = lm.generate("the zebra sees", **args)
    b = lm.generate("the <unk> sees", **args)
    assert a.token_ids == b.token_ids
    np.testing.assert_allclose(a.log_probs, b.log_probs, atol=1e-6)


def test_a_prompt_longer_than_the_training_windows(lm):
    """The tiny run trained on windows of 16 tokens: a prompt of 120 is
    read whole, its state carried (the continuation after it is the
    argmax of its next-token distribution)."""
    prompt = " ".join(["the cat sees a ball ."] * 20) + " my friend"
    g = lm.generate(prompt, 3, details=True)
    assert len(prompt.split()) == 122 and len(g.tokens) == 3
    ref = lm.next_token_logprobs(prompt)
    assert g.token_ids[0] == ref.argmax()
    assert g.log_probs[0] == pytest.approx(ref.max(), abs=1e-4)


def test_with_a_cache_the_log_probs_are_the_cached_scorers(lm):
    cache = CacheConfig(window=6, theta=1.0, lam=0.5)
    prompts = ["the cat sees a ball . my friend", ""]
    gens = lm.generate(prompts, 8, "random", seed=1, cache=cache, details=True)
    for prompt, g in zip(prompts, gens):
        (r,) = lm.scorer.score_document(
            [f"{prompt} {g.text}"], cache, eos=False
        )
        n = len(g.tokens)
        np.testing.assert_allclose(g.log_probs, r.ln_probs[-n:], atol=1e-4)
    setting = "window=6,theta=1,lambda=0.5"
    text = lm.generate(prompts, 8, "random", seed=1, cache=setting)
    assert text == [g.text for g in gens]


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        ({"max_tokens": -1}, "max_tokens"),
        ({"max_tokens": MAX_TOKENS_LIMIT + 1}, "max_tokens"),
        ({"max_tokens": 2.0}, "max_tokens"),
        ({"max_tokens": True}, "max_tokens"),
        ({"num_samples": 0}, "num_samples"),
        ({"num_samples": MAX_ROWS}, "num_samples"),  # x 2 prompts
        ({"sampler": "beam"}, "sampler"),
        ({"sampler": "top_k", "seed": -1}, "seed"),
        ({"sampler": TopKSampler(k=10_000)}, "k"),
        ({"stop_token": "zebra"}, "stop_token"),
        ({"cache": "nope"}, "cache"),
        ({"cache": "ptb,reference=1"}, "cache"),
    ],
)
def test_bad_arguments_name_themselves(lm, kwargs, argument):
    with pytest.raises(GenerationError) as e:
        lm.generate(["the", "a"], **kwargs)
    assert e.value.argument == argument
    assert str(e.value).startswith(argument)


def test_prompts_follow_the_scoring_input_contract(lm):
    with pytest.raises(TypeError, match="NoneType"):
        lm.generate(None)
    with pytest.raises(TypeError):
        lm.generate(["the", 3])


@pytest.mark.slow  # an export (~20 s on 2 cores)
def test_export_and_the_model_from_it(lm, tmp_path):
    path = lm.export(str(tmp_path / "lm" / "1"), warmup=False)
    exported = LanguageModel.from_export(path)
    assert exported.is_export and LanguageModel.load(path).is_export
    assert exported.vocabulary_size == len(lm.vocab)
    for s in SENTENCES:
        assert exported.score(s) == pytest.approx(lm.score(s), abs=1e-5)
        np.testing.assert_allclose(
            exported.full_scores(s), lm.full_scores(s), atol=1e-5
        )
    np.testing.assert_allclose(
        exported.next_token_logprobs(SENTENCES),
        lm.next_token_logprobs(SENTENCES),
        atol=1e-5,
    )
    # generate: the export's signature, the run's text for the same seed
    kwargs = {"max_tokens": 10, "sampler": "top_p", "seed": 3}
    assert exported.generate(SENTENCES, **kwargs) == lm.generate(
        SENTENCES, **kwargs
    )
    with pytest.raises(GenerationError, match="no cache") as e:
        exported.generate("the cat", cache="ptb")
    assert e.value.argument == "cache"
    with pytest.raises(ValueError, match="is an export"):
        exported.export(str(tmp_path / "again" / "1"))
