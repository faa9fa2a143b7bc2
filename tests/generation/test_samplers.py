"""The samplers (keras-hub's names and parameters), their stateless
noise, and the distributions they draw from (chi-square tests at fixed
seeds)."""

import keras
import numpy as np
import pytest
from keras import ops
from scipy import stats

from keras_rnnlm.generation import GenerationError
from keras_rnnlm.generation import GreedySampler
from keras_rnnlm.generation import RandomSampler
from keras_rnnlm.generation import TopKSampler
from keras_rnnlm.generation import TopPSampler
from keras_rnnlm.generation import get_sampler
from keras_rnnlm.generation.samplers import MAX_SEED
from keras_rnnlm.generation.samplers import check_seed
from keras_rnnlm.generation.samplers import stateless_uniform

N = 20_000
#: A distribution over 12 tokens: some likely, some rare.
LOG_PROBS = np.log(
    np.array([20, 15, 12, 10, 9, 8, 7, 6, 5, 4, 2, 2], np.float64) / 100
)


def _draw(sampler, seed=7, step=3, n=N):
    log_probs = np.tile(LOG_PROBS.astype(np.float32), (n, 1))
    return ops.convert_to_numpy(sampler(log_probs, seed, step))


def _tempered(temperature):
    p = np.exp(LOG_PROBS / temperature)
    return p / p.sum()


def _chi_square_p(tokens, probs):
    """p-value of the counts of ``tokens`` against ``probs`` (cells of
    fewer than 5 expected draws merged into one)."""
    if len(probs) == 1:  # one cell: every draw must be in it
        return float(np.all(tokens == 0))
    counts = np.bincount(tokens, minlength=len(probs)).astype(np.float64)
    expected = probs * len(tokens)
    big = expected >= 5
    obs = [*counts[big], counts[~big].sum()] if (~big).any() else counts[big]
    exp = [*expected[big], expected[~big].sum()] if (~big).any() else expected
    assert min(exp) >= 5
    return stats.chisquare(obs, exp).pvalue


@pytest.mark.parametrize(
    "identifier, cls, config",
    [
        ("greedy", GreedySampler, {}),
        ("random", RandomSampler, {"temperature": 1.0}),
        ("top_k", TopKSampler, {"k": 5, "temperature": 1.0}),
        ("top_p", TopPSampler, {"p": 0.1, "k": None, "temperature": 1.0}),
    ],
)
def test_names_defaults_and_config_round_trip(identifier, cls, config):
    """keras-hub's identifiers and defaults; get_config / from_config
    and get_sampler of a config or a sampler round-trip."""
    sampler = get_sampler(identifier)
    assert type(sampler) is cls and sampler.get_config() == config
    assert cls.from_config(sampler.get_config()) == sampler
    again = get_sampler({"class_name": cls.__name__, "config": config})
    assert again == sampler and get_sampler(sampler) is sampler


def test_get_sampler_takes_arguments_and_rejects_unknown_names():
    s = get_sampler("top_p", p=0.9, k=20, temperature=0.7)
    assert s == TopPSampler(0.9, k=20, temperature=0.7)
    assert repr(s) == "TopPSampler(p=0.9, k=20, temperature=0.7)"
    with pytest.raises(GenerationError, match="sampler .beam. is unknown") as e:
        get_sampler("beam")
    assert e.value.argument == "sampler"
    with pytest.raises(GenerationError) as e:
        get_sampler("greedy", temperature=0.5)  # greedy has none
    assert e.value.argument == "sampler"


@pytest.mark.parametrize(
    "make, argument",
    [
        (lambda: RandomSampler(temperature=0), "temperature"),
        (lambda: RandomSampler(temperature=-1.0), "temperature"),
        (lambda: RandomSampler(temperature=float("nan")), "temperature"),
        (lambda: TopKSampler(k=0), "k"),
        (lambda: TopKSampler(k=2.5), "k"),
        (lambda: TopKSampler(k=True), "k"),
        (lambda: TopPSampler(p=0.0), "p"),
        (lambda: TopPSampler(p=1.5), "p"),
        (lambda: TopPSampler(p=0.5, k=0), "k"),
        (lambda: TopKSampler(k=13).check_vocabulary(12), "k"),
        (lambda: TopPSampler(k=13).check_vocabulary(12), "k"),
        (lambda: check_seed(-1), "seed"),
        (lambda: check_seed(MAX_SEED + 1), "seed"),
        (lambda: check_seed(1.0), "seed"),
    ],
)
def test_bad_parameters_name_their_argument(make, argument):
    with pytest.raises(GenerationError) as e:
        make()
    assert e.value.argument == argument


def _reference_uniform(batch, n, seed, step):
    """The noise's hash written again in NumPy's uint32 arithmetic."""

    def mix(x):
        x = x ^ (x >> np.uint32(16))
        x = x * np.uint32(0x85EBCA6B)
        x = x ^ (x >> np.uint32(13))
        x = x * np.uint32(0xC2B2AE35)
        return x ^ (x >> np.uint32(16))

    with np.errstate(over="ignore"):
        counter = (
            np.arange(batch, dtype=np.uint32)[:, None] * np.uint32(n)
            + np.arange(n, dtype=np.uint32)[None, :]
        )
        salted = np.uint32(seed) ^ np.uint32(0x9E3779B9)
        key = mix(mix(salted) + np.uint32(step) * np.uint32(0x7FEB352D))
        bits = mix(mix(counter ^ key) + key)
    return ((bits >> np.uint32(8)).astype(np.float32) + 0.5) * 2.0**-24


def test_noise_is_the_hash_keyed_by_seed_and_step():
    """The noise is the counter hash on every backend (this test also
    runs on JAX); another step or seed is other noise; a row's noise does
    not depend on the batch size."""
    got = ops.convert_to_numpy(stateless_uniform((3, 50), 11, 4))
    np.testing.assert_array_equal(got, _reference_uniform(3, 50, 11, 4))
    assert not np.array_equal(
        ops.convert_to_numpy(stateless_uniform((3, 50), 11, 5)), got
    )
    assert not np.array_equal(
        ops.convert_to_numpy(stateless_uniform((3, 50), 12, 4)), got
    )
    wide = ops.convert_to_numpy(stateless_uniform((9, 50), 11, 4))
    np.testing.assert_array_equal(wide[:3], got)
    big = _reference_uniform(1000, 1000, 3, 1)
    assert 0.0 < big.min() and big.max() < 1.0
    assert abs(big.mean() - 0.5) < 1e-3  # sd of the mean: 2.9e-4
    assert abs(big.var() - 1.0 / 12.0) < 1e-3
    cells = np.bincount((big * 100).astype(int).ravel(), minlength=100)
    assert stats.chisquare(cells).pvalue > 1e-3


def test_noise_is_the_same_inside_an_xla_program():
    """A traced seed and step, in TensorFlow's kernels and compiled by
    XLA, give the same bits (TensorFlow's own stateless random ops do
    not)."""
    if keras.backend.backend() != "tensorflow":
        pytest.skip("TensorFlow's XLA")
    import tensorflow as tf

    def noise(seed, step):
        return stateless_uniform((4, 30), seed, step)

    args = (tf.constant(9), tf.constant(2))
    plain = tf.function(noise)(*args).numpy()
    compiled = tf.function(noise, jit_compile=True)(*args).numpy()
    np.testing.assert_array_equal(plain, compiled)
    np.testing.assert_array_equal(plain, _reference_uniform(4, 30, 9, 2))


def test_greedy_is_the_argmax():
    rng = np.random.default_rng(0)
    log_probs = rng.normal(size=(50, 30)).astype(np.float32)
    got = ops.convert_to_numpy(GreedySampler()(log_probs, 0, 0))
    np.testing.assert_array_equal(got, log_probs.argmax(-1))


def test_same_seed_same_draws_other_seed_other_draws():
    s = RandomSampler()
    a, b, c = _draw(s, 1, 0, 200), _draw(s, 1, 0, 200), _draw(s, 2, 0, 200)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("temperature", [1.0, 0.6, 1.8])
def test_random_draws_follow_the_tempered_softmax(temperature):
    tokens = _draw(RandomSampler(temperature=temperature))
    assert _chi_square_p(tokens, _tempered(temperature)) > 1e-3


def test_the_chi_square_test_can_fail():
    """The check rejects draws from another distribution."""
    tokens = _draw(RandomSampler(temperature=0.8))
    assert _chi_square_p(tokens, _tempered(1.0)) < 1e-6


@pytest.mark.parametrize("k, temperature", [(1, 1.0), (3, 1.0), (5, 0.7)])
def test_top_k_draws_among_the_k_best_only(k, temperature):
    tokens = _draw(TopKSampler(k, temperature=temperature))
    assert set(tokens) <= set(range(k))  # LOG_PROBS is sorted
    probs = _tempered(temperature)[:k]
    assert _chi_square_p(tokens, probs / probs.sum()) > 1e-3


@pytest.mark.parametrize(
    "p, k, temperature, kept",
    [
        (0.1, None, 1.0, 1),  # 0.20 >= 0.1: the best alone
        (0.5, None, 1.0, 4),  # 0.20 + 0.15 + 0.12 < 0.5 <= ... + 0.10
        (0.5, 3, 1.0, 3),  # k first
        (1.0, None, 1.0, 12),
        (0.5, None, 0.5, 2),  # sharper: 0.35 + 0.20 reach p
    ],
)
def test_top_p_draws_from_the_nucleus_only(p, k, temperature, kept):
    tokens = _draw(TopPSampler(p, k=k, temperature=temperature))
    assert set(tokens) <= set(range(kept))
    probs = _tempered(temperature)[:kept]
    assert _chi_square_p(tokens, probs / probs.sum()) > 1e-3


def test_traced_parameters_draw_as_python_ones():
    """A sampler built from traced scalars (the export's ``generate``
    signature builds its samplers from its inputs) draws the tokens of
    the one built from Python numbers (and is not checked by Python)."""
    if keras.backend.backend() != "tensorflow":
        pytest.skip("traces a tf.function")
    import tensorflow as tf

    log_probs = np.tile(LOG_PROBS.astype(np.float32), (500, 1))
    python = [
        RandomSampler(0.7),
        TopKSampler(3, temperature=1.3),
        TopPSampler(0.5, temperature=0.8),
        TopPSampler(0.9, k=4, temperature=1.1),
    ]

    @tf.function(autograph=False)
    def traced(t, k, p, none_k):
        return [
            RandomSampler(t[0])(log_probs, 5, 2),
            TopKSampler(k[0], temperature=t[1])(log_probs, 5, 2),
            TopPSampler(p[0], k=none_k, temperature=t[2])(log_probs, 5, 2),
            TopPSampler(p[1], k=k[1], temperature=t[3])(log_probs, 5, 2),
        ]

    got = traced(
        tf.constant([0.7, 1.3, 0.8, 1.1]),
        tf.constant([3, 4]),
        tf.constant([0.5, 0.9]),
        tf.constant(len(LOG_PROBS)),  # k = the vocabulary: none
    )
    for sampler, tokens in zip(python, got):
        want = ops.convert_to_numpy(sampler(log_probs, 5, 2))
        np.testing.assert_array_equal(tokens.numpy(), want)
        assert len(set(want)) > 1
