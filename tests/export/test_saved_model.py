import json
import os
import subprocess
import sys

import numpy as np
import pytest
from client_parity import TOL
from client_parity import assert_client_parity

from keras_rnnlm.scoring import Scorer

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
REQUEST = os.path.join(ROOT, "export", "examples", "score_text_request.json")


def _sentences():
    sents = [
        "the cat sees a ball .",
        "a zebra likes the okapi .",  # OOV words
        "",  # empty line
        "   ",  # whitespace only
        " ".join(["my friend eats some food ."] * 30),  # > any window
        "the \ufffd cat",
    ]
    ptb = os.path.join(os.environ.get("KERAS_RNNLM_DATA", ""), "ptb/test.txt")
    if os.path.exists(ptb):
        with open(ptb) as f:
            sents += [next(f).strip() for _ in range(3)]  # real PTB lines
    return sents


def _graph_ops(path):
    from tensorflow.core.protobuf import saved_model_pb2

    sm = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        sm.ParseFromString(f.read())
    ops = set()
    for mg in sm.meta_graphs:
        ops.update(n.op for n in mg.graph_def.node)
        for fn in mg.graph_def.library.function:
            ops.update(n.op for n in fn.node_def)
    return ops


@pytest.mark.slow
def test_untrained_export_in_process(tmp_path):
    """Fast default check: layout, no cuDNN op, score_text == Scorer."""
    import tensorflow as tf

    from keras_rnnlm.config import ModelConfig
    from keras_rnnlm.data import build_vocabulary
    from keras_rnnlm.export import export_saved_model
    from keras_rnnlm.models import build_language_model

    vocab = build_vocabulary([["the", "cat", "sees", "a", "ball", "."]])
    cfg = ModelConfig(embedding_dim=8, hidden_sizes=[8], head="tied")
    model = build_language_model(cfg, len(vocab), None, stateful=False)
    scorer = Scorer(model, vocab)
    path = export_saved_model(scorer, str(tmp_path / "lm" / "1"))
    assert not {op for op in _graph_ops(path) if op.startswith("Cudnn")}
    loaded = tf.saved_model.load(path)
    assert set(loaded.signatures) >= {"serving_default", "score_text", "step"}
    sents = ["the cat sees a ball .", "", "zebra the", "a " * 30]
    # Python's whitespace (NBSP, U+001C, ideographic space, ...) splits.
    sents += ["the\xa0cat\x1csees\u3000a\u2028ball", "\u2003 . \x85"]
    r = loaded.signatures["serving_default"](sentences=tf.constant(sents))
    for i, ref in enumerate(scorer.score_sentences(sents)):
        n = int(r["lengths"][i])
        assert n == ref.num_tokens and int(r["num_oov"][i]) == ref.num_oov
        np.testing.assert_allclose(
            r["token_logprobs"][i][:n].numpy(), ref.ln_probs, atol=TOL
        )
        tokens = [t.decode() for t in r["tokens"][i][:n].numpy()]
        assert tokens == ref.tokens


@pytest.mark.slow
def test_layout_assets_and_no_cudnn(exported):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    _, path = exported
    assert os.path.basename(path) == "1"
    assert os.path.exists(os.path.join(path, "saved_model.pb"))
    with open(os.path.join(path, "assets", "vocab.txt")) as f:
        vocab = f.read().splitlines()
    with open(os.path.join(path, "assets", "keras_rnnlm.json")) as f:
        meta = json.load(f)
    assert len(vocab) == meta["vocab_size"] and "<unk>" in vocab
    ops = _graph_ops(path)
    assert not {op for op in ops if op.startswith("Cudnn")}
    assert any("Whitespace" in op for op in ops)  # tensorflow_text inside
    # Inference only: no optimizer or gradient ops, no random ops (the
    # sampling noise of generate is a hash of its seed input).
    assert not {op for op in ops if op.startswith(("ApplyAdam", "Resource"))}
    loaded = tf.saved_model.load(path)
    for name, fn in loaded.signatures.items():
        graph = fn.graph.as_graph_def()
        used = {n.op for n in graph.node}
        for f in graph.library.function:
            used.update(n.op for n in f.node_def)
        random = {op for op in used if "Random" in op or "Dropout" in op}
        assert not random, name
        if name == "generate":  # the noise's hash
            assert {"BitwiseXor", "RightShift"} <= used


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["default", "xla"])
def test_parity_in_fresh_tf_only_process(variant, request, tmp_path):
    """Both exports (the default generic loop, the opt-in XLA one)."""
    fixture = "exported" if variant == "default" else "exported_xla"
    run, path = request.getfixturevalue(fixture)
    scorer = Scorer.from_run(run)
    out, ref = assert_client_parity(
        path,
        scorer,
        _sentences(),
        prefixes=["the cat", "", "zebra"],
        stream_text="a dog likes the tree .",
        tmp_path=tmp_path,
    )
    text = out["score_text"]
    for i, r in enumerate(ref):
        n = text["lengths"][i]
        assert text["tokens"][i][:n] == r.tokens
        assert text["token_is_oov"][i][:n] == r.oov
    assert text["num_oov"][1] == 2  # zebra, okapi


@pytest.mark.slow
def test_score_ids_rejects_bad_ids(exported):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    model = tf.saved_model.load(exported[1])
    fn = model.signatures["score_ids"]
    with pytest.raises(tf.errors.InvalidArgumentError, match="vocabulary"):
        fn(token_ids=tf.constant([[1, 10**6]]), lengths=tf.constant([2]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="lengths"):
        fn(token_ids=tf.constant([[1, 2]]), lengths=tf.constant([3]))
    r = model.signatures["score_text"](sentences=tf.constant([b"\xff\xfe"]))
    assert int(r["num_oov"][0]) == 1 and int(r["num_tokens"][0]) == 2


@pytest.mark.slow
def test_saved_model_cli_accepts_the_documented_request(exported):
    """The REST request of export/README.md matches the signature."""
    with open(REQUEST) as f:
        request = json.load(f)
    sentences = [i["sentences"] for i in request["instances"]]
    code = (
        "import sys, tensorflow_text; "
        "from tensorflow.python.tools import saved_model_cli; "
        "sys.argv = sys.argv[1:]; saved_model_cli.main()"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "saved_model_cli",
            "run",
            "--dir",
            exported[1],
            "--tag_set",
            "serve",
            "--signature_def",
            request["signature_name"],
            "--input_exprs",
            f"sentences={sentences!r}",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "log10_prob" in proc.stdout and "num_oov" in proc.stdout


@pytest.mark.slow
def test_cli_export_score_rescore(tiny_run, tmp_path, capsys):
    from keras_rnnlm.cli import main

    out = tmp_path / "models" / "lm" / "1"
    assert main(["export", tiny_run, str(out)]) == 0
    assert main(["export", tiny_run, str(out)]) == 2  # exists
    text = tmp_path / "in.txt"
    text.write_bytes(b"the cat sees a ball .\n\nzebra \xff\n")
    capsys.readouterr()
    assert main(["score", str(out), str(text), "--json"]) == 0
    saved = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert main(["score", tiny_run, str(text), "--json"]) == 0
    keras_ = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(saved) == 4 and "summary" in saved[-1]
    for a, b in zip(saved[:-1], keras_[:-1]):
        assert a["num_tokens"] == b["num_tokens"]
        assert a["num_oov"] == b["num_oov"]
        assert a["log10_prob"] == pytest.approx(b["log10_prob"], abs=1e-3)


@pytest.mark.slow
def test_random_text_matches_scorer(exported):
    """Property test: the exported graph and the Python scorer agree on
    arbitrary text (tokens, OOV flags, per-token log-probabilities)."""
    import tensorflow as tf
    from hypothesis import given
    from hypothesis import settings
    from hypothesis import strategies as st

    run, path = exported
    scorer = Scorer.from_run(run)
    fn = tf.saved_model.load(path).signatures["score_text"]
    words = st.sampled_from(scorer.vocab.tokens + ["zebra", "\xa0", " "])
    texts = st.one_of(
        st.text(max_size=30), st.lists(words, max_size=12).map(" ".join)
    )

    @settings(max_examples=40, deadline=None)
    @given(st.lists(texts, min_size=1, max_size=4))
    def check(sents):
        r = fn(sentences=tf.constant([s.encode("utf-8") for s in sents]))
        for i, ref in enumerate(scorer.score_sentences(sents)):
            n = int(r["lengths"][i])
            assert n == ref.num_tokens
            tokens = [t.decode() for t in r["tokens"][i][:n].numpy()]
            assert tokens == ref.tokens
            assert list(r["token_is_oov"][i][:n].numpy()) == ref.oov
            np.testing.assert_allclose(
                r["token_logprobs"][i][:n].numpy(), ref.ln_probs, atol=TOL
            )

    check()


@pytest.mark.slow
@pytest.mark.parametrize("space_token", ["_", None])
def test_char_model_export(tmp_path, space_token):
    """Character models: the graph splits Unicode characters (with
    ptb_char's "_" for runs of whitespace) exactly like the Scorer."""
    import tensorflow as tf

    from keras_rnnlm.config import ModelConfig
    from keras_rnnlm.data import Vocabulary
    from keras_rnnlm.export import export_saved_model
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.scoring import Tokenization

    vocab = Vocabulary(list("abcé_ ") + ["<eos>", "<unk>"])
    cfg = ModelConfig(input_encoding="one_hot", hidden_sizes=[8])
    model = build_language_model(cfg, len(vocab), None, stateful=False)
    scorer = Scorer(model, vocab, Tokenization("chars", space_token))
    path = export_saved_model(scorer, str(tmp_path / "char" / "1"))
    fn = tf.saved_model.load(path).signatures["score_text"]
    sents = ["abc", " a  b\u00a0é ", "", "zz a", "ab\n"]
    r = fn(sentences=tf.constant(sents))
    for i, ref in enumerate(scorer.score_sentences(sents)):
        n = int(r["lengths"][i])
        tokens = [t.decode() for t in r["tokens"][i][:n].numpy()]
        assert tokens == ref.tokens
        assert list(r["token_is_oov"][i][:n].numpy()) == ref.oov
        np.testing.assert_allclose(
            r["token_logprobs"][i][:n].numpy(), ref.ln_probs, atol=TOL
        )


def test_in_graph_time_buckets_equal_the_scorer_s():
    import types

    import tensorflow as tf

    from keras_rnnlm.export.saved_model import _Graph
    from keras_rnnlm.scoring.scorer import TIME_BUCKETS
    from keras_rnnlm.scoring.scorer import bucket_length
    from keras_rnnlm.scoring.scorer import check_time_buckets

    ts = np.arange(0, 700)
    coarse = ((64, 8), (128, 16), (None, 64))
    for buckets in (TIME_BUCKETS, coarse):
        graph = types.SimpleNamespace(tf=tf, time_buckets=buckets)
        got = _Graph.bucket_length(graph, tf.constant(ts, tf.int32)).numpy()
        want = [bucket_length(t, buckets) for t in ts]
        np.testing.assert_array_equal(got, want)
        assert all(bucket_length(t, buckets) >= t for t in ts)
    assert bucket_length(23) == 24 and bucket_length(17) == 20
    assert bucket_length(1) == 4 and bucket_length(33) == 40
    assert bucket_length(17, coarse) == 24
    # A bounded set of compiled shapes: 20 lengths cover 1..256.
    assert len({bucket_length(t) for t in range(1, 257)}) == 20
    for bad in (((64, 8),), ((64, 8), (32, 4), (None, 64)), ((None, 0),)):
        with pytest.raises(ValueError, match="time_buckets"):
            check_time_buckets(bad)


@pytest.mark.slow
def test_multicell_export_starts_from_the_initial_cells(tmp_path):
    """A multi-cell LSTM with distinct initial cells: the exported
    endpoints start from those cells (not zeros), like the Scorer and the
    stateless Keras model."""
    import tensorflow as tf

    from keras_rnnlm.config import ModelConfig
    from keras_rnnlm.data import build_vocabulary
    from keras_rnnlm.export import export_saved_model
    from keras_rnnlm.models import build_language_model

    vocab = build_vocabulary([["the", "cat", "sees", "a", "ball", "."]])
    cfg = ModelConfig(
        embedding_dim=6,
        hidden_sizes=[6],
        cell="multicell_lstm",
        cell_kwargs=dict(num_cells=3, initial_cells="linspace"),
    )
    model = build_language_model(cfg, len(vocab), None, stateful=False)
    scorer = Scorer(model, vocab)
    assert any(v.any() for v in scorer.inference.initial_values)
    path = export_saved_model(scorer, str(tmp_path / "lm" / "1"))
    loaded = tf.saved_model.load(path)
    sents = ["the cat sees a ball .", "a ball"]
    r = loaded.signatures["score_text"](sentences=tf.constant(sents))
    for i, ref in enumerate(scorer.score_sentences(sents)):
        n = int(r["lengths"][i])
        np.testing.assert_allclose(
            r["token_logprobs"][i][:n].numpy(), ref.ln_probs, atol=TOL
        )
    init = loaded.signatures["initial_state"](batch_size=tf.constant(2))
    for name, value in zip(
        scorer.inference.state_names, scorer.inference.initial_states(2)
    ):
        np.testing.assert_allclose(init[name].numpy(), value, atol=1e-7)
    # The reference: the Keras model's own (stateless) forward pass.
    ids = np.array([[vocab.eos_id, *vocab.encode("a ball".split())]])
    logp = tf.nn.log_softmax(model(ids)).numpy()[0]
    targets = [*vocab.encode("a ball".split()), vocab.eos_id]
    np.testing.assert_allclose(
        r["token_logprobs"][1][:3].numpy(),
        logp[np.arange(3), targets],
        atol=TOL,
    )
