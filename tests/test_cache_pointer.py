"""The continuous cache pointer's arithmetic (Grave et al. 2017) against
independent NumPy float64 implementations."""

import numpy as np
import pytest
from cache_references import random_stream
from cache_references import reference_natural
from cache_references import reference_pointer_py
from cache_references import softmax
from cache_references import vocab_lp

from keras_rnnlm.cache_pointer import CacheConfig
from keras_rnnlm.cache_pointer import CacheMemory
from keras_rnnlm.cache_pointer import CacheStream
from keras_rnnlm.cache_pointer import cache_keys
from keras_rnnlm.cache_pointer import cache_log_distribution
from keras_rnnlm.cache_pointer import keyed_model
from keras_rnnlm.config import ModelConfig
from keras_rnnlm.models import build_language_model


def run_stream(h, y, logits, cache, bptt):
    """ln p of every target of one stream fed in segments of ``bptt``."""
    stream = CacheStream(cache, h.shape[-1])
    lp = vocab_lp(logits, y)
    out = [
        stream.log_probs(
            h[None, s : s + bptt], y[None, s : s + bptt], lp[None, s : s + bptt]
        )[0]
        for s in range(0, len(y), bptt)
    ]
    return np.concatenate(out)


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


def test_keys_are_the_last_recurrent_layers_output():
    cfg = ModelConfig(embedding_dim=4, hidden_sizes=[6, 5])
    model = build_language_model(cfg, 11, None, stateful=False, seed=0)
    assert cache_keys(model) is model.get_layer("rnn_1").output
    keyed = keyed_model(model)
    x = np.random.default_rng(0).integers(0, 11, (2, 7)).astype("int32")
    logits, keys = keyed(x)
    np.testing.assert_allclose(np.asarray(logits), np.asarray(model(x)))
    assert tuple(keys.shape) == (2, 7, 5)
