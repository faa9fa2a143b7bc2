"""A CBOW context model (arXiv:2106.08927) through the SavedModel export:
the last K word ids are one more streaming state of ``step`` (an input and
an output, checked like the recurrent states), and every signature equals
the in-Keras Scorer, in both export variants."""

import json
import os

import numpy as np
import pytest
from client_parity import TOL
from client_parity import assert_client_parity
from test_serving_contract import CORE_OPS
from test_serving_contract import TEXT_OPS
from test_serving_contract import _library

from keras_rnnlm.scoring import Scorer

WINDOW = 5  # K: shorter than the test texts, so the window slides
WORDS = "the cat a dog my friend bird sees likes eats finds fish ball some"
WORDS += " food tree ."


def cbow_scorer(weighting="positional"):
    """An untrained CBOW-LSTM (weights drawn wide enough that the context
    vector moves the distribution) and its Scorer."""
    from keras_rnnlm.config import ModelConfig
    from keras_rnnlm.data import build_vocabulary
    from keras_rnnlm.models import build_language_model

    vocab = build_vocabulary([WORDS.split()])
    cfg = ModelConfig(
        embedding_dim=8,
        hidden_sizes=[8],
        init_range=0.6,
        context={"weighting": weighting, "window": WINDOW, "dim": 6},
    )
    model = build_language_model(cfg, len(vocab), None, stateful=False, seed=3)
    return Scorer(model, vocab)


@pytest.fixture(scope="module")
def cbow_exports(tmp_path_factory):
    """(scorer, default export); the ``--xla`` one is made by the slow
    parity test only (each export takes several seconds)."""
    from keras_rnnlm.export import export_saved_model

    scorer = cbow_scorer()
    root = tmp_path_factory.mktemp("cbow_export")
    return scorer, export_saved_model(scorer, str(root / "cbow" / "1"))


def _load(path):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    return tf.saved_model.load(path)


@pytest.mark.slow
def test_cbow_window_is_a_token_ids_state(cbow_exports):
    scorer, default = cbow_exports
    infer = scorer.inference
    assert infer.state_kinds == ["token_ids", "recurrent", "recurrent"]
    assert infer.state_shapes[0] == (WINDOW,)
    with open(os.path.join(default, "assets", "keras_rnnlm.json")) as f:
        meta = json.load(f)
    assert meta["state_kinds"] == infer.state_kinds
    assert meta["state_names"] == infer.state_names
    model = _load(default)
    step = model.signatures["step"]
    specs = step.structured_input_signature[1]
    assert set(specs) == {"token_ids", *infer.state_names}
    assert set(step.structured_outputs) == {"log_probs", *infer.state_names}
    init = model.signatures["initial_state"](batch_size=np.int32(3))
    np.testing.assert_array_equal(init["state_0_0"].numpy(), -np.ones((3, 5)))


def test_cbow_export_ops_are_allow_listed(cbow_exports):
    _, default = cbow_exports
    ops, xla_functions = _library(default)
    assert xla_functions == []
    assert ops - CORE_OPS - TEXT_OPS == set()
    assert {"Pad", "GreaterEqual"} <= ops  # the CBOW window's
    from tensorflow.python.framework import op_def_registry

    assert [o for o in ops - TEXT_OPS if op_def_registry.get(o) is None] == []


def test_cbow_step_in_pieces_equals_scoring_whole(cbow_exports):
    """Two texts longer than K fed through ``step`` in pieces (of 1, 3, 1,
    7 and the rest tokens) equal scoring them whole, with the Scorer and
    with ``score_ids``; the window state is the last K ids fed."""
    import tensorflow as tf

    scorer, default = cbow_exports
    model = _load(default)
    texts = [
        "the cat sees a ball . my friend eats some food . a dog finds",
        "a bird likes the tree . the cat eats the fish . my dog sees",
    ]
    ids = np.array([scorer.vocab.encode(t.split()) for t in texts], "int32")
    state = model.signatures["initial_state"](batch_size=np.int32(2))
    bos = state.pop("bos_ids").numpy()
    inputs = np.concatenate([bos[:, None], ids[:, :-1]], 1)
    window_ids = np.concatenate([np.full((2, WINDOW), -1), inputs], 1)
    got, start = [], 0
    for size in (1, 3, 1, 7, inputs.shape[1]):
        piece = inputs[:, start : start + size]
        size = piece.shape[1]
        r = model.signatures["step"](token_ids=tf.constant(piece), **state)
        state = {k: v for k, v in r.items() if k != "log_probs"}
        got.append(r["log_probs"].numpy())
        end = start + size + WINDOW  # in ``window_ids``
        np.testing.assert_array_equal(
            state["state_0_0"].numpy(), window_ids[:, end - WINDOW : end]
        )
        start += size
    logp = np.concatenate(got, 1)
    per_token = np.take_along_axis(logp, ids[..., None], -1)[..., 0]
    whole = scorer.score_sentences(texts, eos=False)
    for row, ref in zip(per_token, whole, strict=True):
        np.testing.assert_allclose(row, ref.ln_probs, atol=TOL)
    r = model.signatures["score_ids"](
        token_ids=tf.constant(ids), lengths=tf.constant([ids.shape[1]] * 2)
    )
    np.testing.assert_allclose(
        r["token_logprobs"].numpy()[:, :-1], per_token, atol=TOL
    )
    # The window state matters: the last piece from an empty window (the
    # recurrent states kept) gives other numbers.
    empty = model.signatures["initial_state"](batch_size=np.int32(2))
    state["state_0_0"] = empty["state_0_0"]
    r = model.signatures["step"](token_ids=tf.constant(piece), **state)
    assert np.abs(r["log_probs"].numpy() - got[-1]).max() > 1e-3


def test_cbow_step_checks_the_window_ids(cbow_exports):
    import tensorflow as tf

    scorer, default = cbow_exports
    step = _load(default).signatures["step"]
    state = _load(default).signatures["initial_state"](batch_size=np.int32(1))
    state.pop("bos_ids")
    good = step(token_ids=tf.constant([[1]]), **state)
    assert good["state_0_0"].numpy()[0, -1] == 1.0
    V = len(scorer.vocab)
    for bad, match in (
        (1.5, "whole numbers"),
        (np.nan, "whole numbers"),
        (-2.0, "-1"),
        (float(V), "vocabulary size"),
    ):
        window = np.full((1, WINDOW), -1.0, "float32")
        window[0, 2] = bad
        with pytest.raises(tf.errors.InvalidArgumentError, match=match):
            step(
                token_ids=tf.constant([[1]]),
                **{**state, "state_0_0": tf.constant(window)},
            )
    with pytest.raises(tf.errors.InvalidArgumentError, match="state_0_0"):
        step(
            token_ids=tf.constant([[1]]),
            **{**state, "state_0_0": tf.fill([1, WINDOW + 1], -1.0)},
        )


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["default", "xla"])
def test_cbow_parity_in_fresh_tf_only_process(variant, cbow_exports, tmp_path):
    """Every signature of both exports, loaded in a process that imports
    only TensorFlow and tensorflow-text, within 1e-4 of the Scorer."""
    from keras_rnnlm.export import export_saved_model

    scorer, path = cbow_exports
    if variant == "xla":
        path = export_saved_model(scorer, str(tmp_path / "xla" / "1"), xla=True)
        assert _library(path)[1]  # the fused, XLA-compiled loop
    sents = [
        "the cat sees a ball .",
        "a zebra likes the okapi .",  # OOV words
        "",
        " ".join(["my friend eats some food ."] * 6),  # > K, > 32 steps
    ]
    out, ref = assert_client_parity(
        path,
        scorer,
        sents,
        prefixes=["the cat sees a ball . my friend", "", "zebra"],
        stream_text="a dog likes the tree . the bird eats some food .",
        tmp_path=tmp_path,
    )
    assert out["score_text"]["tokens"][1][:7] == ref[1].tokens
