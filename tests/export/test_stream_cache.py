"""The continuous cache pointer (arXiv:1612.04426) over an export's
``step_with_keys``: the keys it returns, kept by the client's StepCache,
give the in-Keras Scorer's cached probabilities, however the text is cut
into calls."""

import json
import os

import numpy as np
import pytest

from keras_rnnlm.cache_pointer import CacheConfig
from keras_rnnlm.export.stream_cache import StepCache

TOL = 1e-4
CACHE = CacheConfig(window=6, theta=0.7, lam=0.4)
TEXT = "the cat sees a ball . the cat likes the ball . a cat sees the"


@pytest.fixture(scope="module")
def keyed_export(tmp_path_factory):
    """(scorer, loaded default export, its metadata) of an untrained
    CBOW-LSTM (wide weights: the cache and the context matter)."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    from keras_rnnlm.config import ModelConfig
    from keras_rnnlm.data import build_vocabulary
    from keras_rnnlm.export import export_saved_model
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.scoring import Scorer

    vocab = build_vocabulary([TEXT.split() + ["dog", "likes"]])
    cfg = ModelConfig(
        embedding_dim=8,
        hidden_sizes=[8, 6],
        init_range=0.6,
        context={"weighting": "uniform", "window": 3, "dim": 4},
    )
    model = build_language_model(cfg, len(vocab), None, stateful=False, seed=2)
    scorer = Scorer(model, vocab)
    path = tmp_path_factory.mktemp("keyed") / "lm" / "1"
    export_saved_model(scorer, str(path), warmup=False)
    with open(os.path.join(path, "assets", "keras_rnnlm.json")) as f:
        meta = json.load(f)
    return scorer, tf.saved_model.load(str(path)), meta


def _stream(model, ids, pieces, cache):
    """Feeds <eos> + ids through step_with_keys in pieces; returns
    (StepCache ln p of ids, plain ln p of ids)."""
    import tensorflow as tf

    state = model.signatures["initial_state"](batch_size=np.int32(1))
    bos = state.pop("bos_ids").numpy()
    feed = np.concatenate([bos, ids])[None].astype(np.int32)
    got, logp, start = [], [], 0
    for size in pieces:
        piece = feed[:, start : start + size]
        out = model.signatures["step_with_keys"](
            token_ids=tf.constant(piece), **state
        )
        out = {k: v.numpy() for k, v in out.items()}
        state = {k: v for k, v in out.items() if k.startswith("state_")}
        got.append(cache.score(piece, out))
        logp.append(out["log_probs"][0])
        start += piece.shape[1]
    assert start == feed.shape[1]
    logp = np.concatenate(logp, 0)
    return np.concatenate(got, 1)[0], logp[np.arange(len(ids)), ids]


@pytest.mark.slow
def test_step_with_keys_is_step_plus_the_keys(keyed_export):
    import tensorflow as tf

    scorer, model, meta = keyed_export
    assert meta["key_dim"] == scorer.inference.key_dim == 6
    assert "step_with_keys" in meta["endpoints"]
    state = model.signatures["initial_state"](batch_size=np.int32(2))
    state.pop("bos_ids")
    ids = np.array([[1, 2, 3, 4], [4, 3, 2, 1]], np.int32)
    a = model.signatures["step"](token_ids=tf.constant(ids), **state)
    b = model.signatures["step_with_keys"](token_ids=tf.constant(ids), **state)
    assert set(b) == set(a) | {"keys"}
    for k in a:
        np.testing.assert_allclose(b[k].numpy(), a[k].numpy(), atol=1e-6)
    states = [state[n].numpy() for n in scorer.inference.state_names]
    _, keys, _ = scorer.inference.with_keys(ids, states)
    np.testing.assert_allclose(b["keys"].numpy(), keys, atol=1e-5)
    assert b["keys"].shape == (2, 4, 6)


@pytest.mark.parametrize("pieces", [(1, 3, 1, 7, 5), (17,), (5, 12)])
def test_client_cache_equals_the_scorer_s(keyed_export, pieces):
    scorer, model, _ = keyed_export
    ids = scorer.vocab.encode(TEXT.split())
    assert len(ids) + 1 == sum(pieces)
    cache = StepCache(CACHE, scorer.inference.key_dim)
    got, plain = _stream(model, ids, pieces, cache)
    # Every input after <eos> is scored once, from the position before.
    assert got.shape == (len(ids),)
    _, seg = scorer.continue_(
        scorer.begin(), TEXT, cache=scorer.cache_stream(CACHE)
    )
    np.testing.assert_allclose(got, seg.ln_probs, atol=TOL)
    _, bare = scorer.continue_(scorer.begin(), TEXT)
    np.testing.assert_allclose(plain, bare.ln_probs, atol=TOL)
    assert np.abs(got - plain).max() > 1e-2  # the cache is used


def test_next_token_distribution(keyed_export):
    scorer, model, _ = keyed_export
    ids = scorer.vocab.encode(TEXT.split())
    cache = StepCache(CACHE, scorer.inference.key_dim)
    # Feed <eos> + the text: the last position predicts what follows.
    _stream(model, ids, (len(ids) + 1,), cache)
    dist = cache.next_log_probs()[0]
    assert abs(np.log(np.exp(dist.astype(np.float64)).sum())) < 1e-4
    for word in ("cat", "dog", "."):
        _, seg = scorer.continue_(
            scorer.begin(), f"{TEXT} {word}", cache=scorer.cache_stream(CACHE)
        )
        assert dist[scorer.vocab.encode([word])[0]] == pytest.approx(
            seg.ln_probs[-1], abs=TOL
        )


def test_step_cache_checks_its_inputs(keyed_export):
    scorer, _, _ = keyed_export
    cache = StepCache("window=4,theta=1,lambda=0.1", 6, batch_size=2)
    assert cache.cache == CacheConfig(4, 1.0, 0.1)
    with pytest.raises(ValueError, match="score"):
        cache.next_log_probs()
    out = {"log_probs": np.zeros((2, 3, 5)), "keys": np.zeros((2, 3, 6))}
    with pytest.raises(ValueError, match=r"\[2, T\]"):
        cache.score(np.zeros((1, 3)), out)
    with pytest.raises(ValueError, match="another call"):
        cache.score(np.zeros((2, 4)), out)
