"""``model.context``: the CBOW context module in the builder
(*On the long-term learning ability of LSTM LMs*, arXiv:2106.08927)."""

import dataclasses

import numpy as np
import pytest
from keras import ops

from keras_rnnlm.config import ConfigError
from keras_rnnlm.config import ModelConfig
from keras_rnnlm.layers.cbow_context import CBOWContext
from keras_rnnlm.models import build_language_model
from keras_rnnlm.models import copy_weights
from keras_rnnlm.models import reset_states
from keras_rnnlm.models.builder import context_spec
from keras_rnnlm.models.params import count_params
from keras_rnnlm.models.weights import model_parameters

V = 40


def _config(**context):
    return ModelConfig(
        embedding_dim=6,
        hidden_sizes=[7],
        dropout=0.5,
        init_range=0.05,
        context={"type": "cbow", "weighting": "uniform", **context},
    )


@pytest.mark.parametrize("weighting", ["uniform", "positional", "idf"])
@pytest.mark.parametrize("head", ["softmax", "tied"])
def test_param_count_closed_form(weighting, head):
    cfg = dataclasses.replace(
        _config(weighting=weighting, dim=5, window=4),
        head=head,
        hidden_sizes=[6] if head == "tied" else [7],
    )
    model = build_language_model(cfg, V, None, stateful=False, seed=0)
    assert count_params(cfg, V) == model.count_params() - (
        V if weighting == "idf" else 0  # the IDF: data, not trainable
    )
    trainable = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
    assert count_params(cfg, V) == trainable == model_parameters(model)


def test_paper_sizes_wikitext2():
    """Small model of the paper on WikiText-2 (V = 33278): vanilla and
    with the CBOW module (dim 100, as the LSTM's embedding)."""
    v = 33278
    vanilla = ModelConfig(embedding_dim=100, hidden_sizes=[200])
    cbow = dataclasses.replace(vanilla, context={"type": "cbow", "dim": 100})
    lstm = 4 * 200 * (100 + 200 + 1)
    softmax = 200 * v + v
    assert count_params(vanilla, v) == v * 100 + lstm + softmax
    assert count_params(cbow, v) == count_params(vanilla, v) + v * 100 + (
        4 * 200 * 100
    )


def test_context_defaults_and_validation():
    spec = context_spec(ModelConfig(embedding_dim=9, context={}))
    assert spec == {
        "type": "cbow",
        "weighting": "uniform",
        "window": 100,
        "dim": 9,
        "alpha": 1.05,
    }
    assert context_spec(ModelConfig()) is None
    bad = [
        ({"type": "lda"}, "type"),
        ({"weighting": "tfidf"}, "weighting"),
        ({"window": 0}, "window"),
        ({"dim": 2.5}, "dim"),
        ({"alpha": 0.9}, "alpha"),
        ({"K": 3}, "Unknown"),
    ]
    for context, match in bad:
        with pytest.raises(ConfigError, match=match):
            build_language_model(
                ModelConfig(context=context), V, None, stateful=False
            )


def test_stateful_carry_and_reset():
    """Two windows in a row equal one call over both (the CBOW window and
    the LSTM state carried); reset_states empties the CBOW window too."""
    cfg = _config(weighting="positional", window=5)
    one = build_language_model(cfg, V, batch_size=2, seed=3)
    two = build_language_model(cfg, V, batch_size=2, seed=4)
    copy_weights(one, two)
    x = np.random.default_rng(0).integers(0, V, (2, 12)).astype("int32")
    want = ops.convert_to_numpy(one(x))
    got = np.concatenate(
        [
            ops.convert_to_numpy(two(x[:, :7])),
            ops.convert_to_numpy(two(x[:, 7:])),
        ],
        axis=1,
    )
    np.testing.assert_allclose(got, want, atol=1e-5)
    reset_states(two)
    (layer,) = [la for la in two.layers if isinstance(la, CBOWContext)]
    assert np.all(ops.convert_to_numpy(layer.states[0]) == -1.0)
    np.testing.assert_allclose(
        ops.convert_to_numpy(two(x[:, :7])), want[:, :7], atol=1e-5
    )


def test_seeded_context_table_and_dropout_on_both():
    cfg = _config(dim=3)
    model = build_language_model(cfg, V, None, stateful=False, seed=1)
    table = model.get_layer("cbow_context").embeddings
    assert np.abs(ops.convert_to_numpy(table)).max() <= 0.05
    first = model.get_layer("rnn_0").input
    assert first.shape[-1] == 6 + 3
    assert model.get_layer("dropout_0").input.shape[-1] == 6 + 3


def test_idf_is_copied_saved_and_loaded(tmp_path):
    from keras_rnnlm.models.context import set_context_idf

    cfg = _config(weighting="idf", window=3)
    train = build_language_model(cfg, V, batch_size=2, seed=0)
    idf = np.linspace(0.0, 4.0, V).astype("float32")
    assert set_context_idf(train, idf) == 1
    twin = build_language_model(cfg, V, batch_size=1, seed=1)
    copy_weights(train, twin)
    got = twin.get_layer("cbow_context").idf
    np.testing.assert_array_equal(ops.convert_to_numpy(got), idf)
    path = str(tmp_path / "w.weights.h5")
    train.save_weights(path)
    other = build_language_model(cfg, V, batch_size=3, seed=2)
    other.load_weights(path)
    got = other.get_layer("cbow_context").idf
    np.testing.assert_array_equal(ops.convert_to_numpy(got), idf)
