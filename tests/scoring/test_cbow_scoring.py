"""A CBOW context model (arXiv:2106.08927) in the scoring graph: the last
K ids are one more state tensor of the stateless inference model."""

import numpy as np
import pytest
from keras import ops

from keras_rnnlm.config import ModelConfig
from keras_rnnlm.data.vocabulary import Vocabulary
from keras_rnnlm.inference_model import build_inference_model
from keras_rnnlm.models import build_language_model
from keras_rnnlm.models import copy_weights
from keras_rnnlm.models.context import set_context_idf
from keras_rnnlm.scoring.scorer import Scorer

V = 30


def _models(weighting):
    cfg = ModelConfig(
        embedding_dim=6,
        hidden_sizes=[8],
        init_range=0.3,
        context={"weighting": weighting, "window": 7, "dim": 5},
    )
    stateful = build_language_model(cfg, V, batch_size=2, seed=0)
    if weighting == "idf":
        set_context_idf(stateful, np.linspace(0.1, 3.0, V).astype("float32"))
    stateless = build_language_model(cfg, V, None, stateful=False, seed=1)
    copy_weights(stateful, stateless)
    return stateful, stateless


@pytest.mark.parametrize("weighting", ["uniform", "positional", "idf"])
def test_inference_model_streams_like_the_stateful_model(weighting):
    stateful, stateless = _models(weighting)
    x = np.random.default_rng(0).integers(0, V, (2, 20)).astype("int32")
    want = ops.convert_to_numpy(stateful(x))
    infer = build_inference_model(stateless)
    assert infer.state_shapes[0] == (7,)  # the CBOW window's ids
    states = infer.initial_states(2)
    assert np.all(states[0] == -1.0)
    got = []
    for chunk in (x[:, :9], x[:, 9:13], x[:, 13:]):
        logits, states = infer(chunk, states)
        got.append(ops.convert_to_numpy(logits))
    np.testing.assert_allclose(np.concatenate(got, 1), want, atol=1e-5)


def test_scorer_scores_a_cbow_model():
    _, stateless = _models("positional")
    vocab = Vocabulary(["<eos>", "<unk>", *(f"w{i}" for i in range(V - 2))])
    assert len(vocab) == V
    scorer = Scorer(stateless, vocab)
    one = scorer.score("w1 w2 w3", natural_log=True)
    batch = scorer.score_batch(["w1 w2 w3", "w4 w5"], natural_log=True)
    assert np.isfinite(one) and np.allclose(batch[0], one, atol=1e-5)


@pytest.mark.slow  # ~12 s: keeps the default run near 10 min on 2 cores
def test_nbest_rescoring_with_a_cbow_run(tiny_config):
    """`keras-rnnlm rescore`'s path (Scorer.from_run + nbest.rescore) on a
    trained CBOW run: the LM ranks the tiny N-best lists' right answers
    first."""
    import os

    from keras_rnnlm.config import apply_overrides
    from keras_rnnlm.scoring import nbest
    from keras_rnnlm.training import train

    cfg = apply_overrides(
        tiny_config,
        [
            "train.epochs=10",
            "train.learning_rate=0.02",
            'model.context={"weighting": "positional", "window": 20}',
        ],
    )
    train(cfg)
    scorer = Scorer.from_run(cfg.train.out_dir)
    data = os.path.join(os.path.dirname(__file__), "data")
    with open(os.path.join(data, "nbest.txt"), encoding="utf-8") as f:
        lists = nbest.read_nbest(f.read().splitlines())
    with open(os.path.join(data, "reference.txt"), encoding="utf-8") as f:
        refs = nbest.read_references(f.read().splitlines())
    ranked = nbest.rescore(scorer, lists, lm_weight=1.0)
    before = nbest.word_error_rate(nbest.one_best(ranked, "base"), refs)
    after = nbest.word_error_rate(nbest.one_best(ranked, "total"), refs)
    assert after[1] < before[1]
