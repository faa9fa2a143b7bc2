"""What a stock TF Serving binary needs of an export: no XLA-must-compile
function by default, only allow-listed ops, and inputs checked in the graph
(a bad request is INVALID_ARGUMENT, never a crash of the server)."""

import json
import os
import subprocess
import sys

import pytest

# TensorFlow core ops the export may use. A new op fails the test on
# purpose: check that the servers we document (export/README.md) have it.
CORE_OPS = {
    "AddV2", "All", "Assert", "AssignVariableOp", "BiasAdd", "BroadcastTo",
    "Cast", "ConcatV2", "Const", "Cumsum", "DisableCopyOnRead",
    "EnsureShape", "Equal", "Exp", "ExpandDims", "Fill", "FloorDiv",
    "GatherV2", "GreaterEqual", "HashTableV2", "Identity", "If",
    "InitializeTableFromTextFileV2", "IsFinite", "Less", "LessEqual", "Log",
    "LogSoftmax", "LogicalAnd", "LookupTableFindV2", "MatMul", "Max",
    "Maximum", "MergeV2Checkpoints", "Minimum", "Mul", "Neg", "NoOp",
    "Pack", "Pad", "Placeholder", "Prod", "RaggedGather",
    "RaggedTensorToTensor",
    "Range", "ReadVariableOp", "RealDiv", "Reshape", "ResourceGather",
    "RestoreV2",
    "SaveV2", "ScatterNd", "Select", "SelectV2", "Shape",
    "ShardedFilename", "Sigmoid", "Split", "Squeeze",
    "StatefulPartitionedCall", "PartitionedCall", "StaticRegexFullMatch",
    "StaticRegexReplace", "StopGradient", "StridedSlice", "StringJoin",
    "Sub", "Sum", "Tanh", "TensorListFromTensor", "TensorListGetItem",
    "TensorListReserve", "TensorListSetItem", "TensorListStack", "Tile",
    "TopKV2", "Transpose", "UnicodeTranscode", "UnicodeDecodeWithOffsets",
    "UnsortedSegmentSum", "VarHandleOp", "VarIsInitializedOp", "Where",
    "While", "StringSplitV2", "RaggedTensorFromVariant",
    # generate: the generation loop's (tests/generation/test_loop.py's
    # LOOP_OPS: the samplers' ArgMax, their noise's hash, the loop's
    # masks), the sampler switch (StatelessCase), a few comparisons and
    # reductions of its input checks, and the text (ReduceJoin). Core ops
    # of TensorFlow 2.x (the test below checks each is registered).
    "Any", "ArgMax", "Bitcast", "BitwiseAnd", "BitwiseXor", "Greater",
    "LogicalNot", "LogicalOr", "Min", "NotEqual", "ReduceJoin",
    "RightShift", "StatelessCase",
}  # fmt: skip
# tensorflow-text ops that tensorflow-text 2.12.1 has (the version linked
# by stock TF Serving 2.12-2.19): WhitespaceTokenizeWithOffsetsV2 exists
# since tensorflow-text 2.7.
TEXT_OPS = {"TFText>WhitespaceTokenizeWithOffsetsV2"}

# Runs every signature with bad inputs in a fresh process: a crash of the
# process (e.g. a segfault, exit -11) fails the test instead of pytest.
_BAD_INPUTS = r"""
import json, sys
import tensorflow as tf, tensorflow_text  # noqa: F401
model = tf.saved_model.load(sys.argv[1])
GOOD = {tf.string: "the cat", tf.int32: 1, tf.float32: 0.0, tf.int64: 1}
# Inputs of unknown rank (generate's parameters: a scalar or one value
# per prompt) keep a good scalar; the cases apply to the others.
SCALARS = {"max_tokens": 1, "sampler": "greedy", "temperature": 1.0,
           "top_k": 0, "top_p": 1.0, "seed": 0, "num_samples": 1,
           "stop_token": ""}
results = {}
for sig in sys.argv[2:]:
    fn = model.signatures[sig]
    specs = fn.structured_input_signature[1]
    for case in ("rank0", "rank_plus_1", "empty", "dtype"):
        args = {}
        for name, spec in specs.items():
            rank, dt = spec.shape.rank, spec.dtype
            other = tf.string if dt != tf.string else tf.int32
            if rank is None:
                v = tf.constant(SCALARS[name], dt)
                if case == "dtype":
                    v = tf.constant(GOOD[other], other)
                args[name] = v
                continue
            full = [1 if d is None else d for d in spec.shape.as_list()]
            good = tf.fill(full, tf.constant(GOOD[dt], dt))
            if case == "rank0":
                v = tf.constant(GOOD[dt], dt) if rank else tf.constant([1], dt)
            elif case == "rank_plus_1":
                v = tf.expand_dims(good, 0)
            elif case == "empty":
                v = good[:0] if rank else tf.constant(0, dt)
            else:
                v = tf.fill(full, tf.constant(GOOD[other], other))
            args[name] = v
        try:
            fn(**args)
            results[f"{sig}/{case}"] = "ok"
        except tf.errors.InvalidArgumentError as e:
            results[f"{sig}/{case}"] = "INVALID_ARGUMENT: " + e.message
        except Exception as e:  # anything else is a failure of the test
            results[f"{sig}/{case}"] = f"{type(e).__name__}: {e}"
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def small_exports(tmp_path_factory):
    """An untrained small word model, exported by default and with XLA."""
    from keras_rnnlm.config import ModelConfig
    from keras_rnnlm.data import build_vocabulary
    from keras_rnnlm.export import export_saved_model
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.scoring import Scorer

    vocab = build_vocabulary([["the", "cat", "sees", "a", "ball", "."]])
    cfg = ModelConfig(embedding_dim=8, hidden_sizes=[8, 8])
    model = build_language_model(cfg, len(vocab), None, stateful=False)
    scorer = Scorer(model, vocab)
    root = tmp_path_factory.mktemp("contract")
    default = export_saved_model(
        scorer, str(root / "lm" / "1"), max_batch_size=8, max_tokens=64
    )
    xla = export_saved_model(scorer, str(root / "xla" / "1"), xla=True)
    return default, xla


def _library(path):
    from tensorflow.core.protobuf import saved_model_pb2

    sm = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        sm.ParseFromString(f.read())
    ops, xla_functions = set(), []
    for mg in sm.meta_graphs:
        ops.update(n.op for n in mg.graph_def.node)
        for fn in mg.graph_def.library.function:
            ops.update(n.op for n in fn.node_def)
            if fn.attr["_XlaMustCompile"].b:
                xla_functions.append(fn.signature.name)
    return ops, xla_functions


def test_default_export_has_no_xla_function_and_allowed_ops(small_exports):
    default, xla = small_exports
    ops, xla_functions = _library(default)
    assert xla_functions == []
    assert ops - CORE_OPS - TEXT_OPS == set()
    # The allow-listed core ops are TensorFlow's own (no custom op).
    code = (
        "import sys; from tensorflow.python.framework import op_def_registry"
        " as r; print([o for o in sys.argv[1:] if r.get(o) is None])"
    )
    core = sorted(ops - TEXT_OPS)
    out = subprocess.run(
        [sys.executable, "-c", code, *core],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
    # The opt-in XLA export keeps the fused, XLA-compiled loop.
    _, xla_functions = _library(xla)
    assert xla_functions
    with open(os.path.join(default, "assets", "keras_rnnlm.json")) as f:
        meta = json.load(f)
    assert meta["xla"] is False
    assert meta["limits"] == {"max_batch_size": 8, "max_tokens": 64}


@pytest.mark.slow
def test_every_signature_rejects_bad_inputs_without_crashing(small_exports):
    from keras_rnnlm.export import ENDPOINTS

    default, _ = small_exports
    proc = subprocess.run(
        [sys.executable, "-c", _BAD_INPUTS, default, *ENDPOINTS],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-3000:])
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(results) == 4 * len(ENDPOINTS)
    for key, result in results.items():
        sig, case = key.split("/")
        if sig == "initial_state" and case == "empty":
            want = "empty batch"  # batch_size 0
        elif case in ("rank0", "rank_plus_1"):
            want = "is not compatible with expected shape"
        elif case == "empty":
            want = "empty batch"
        else:
            want = "was expected to be a"
        assert result.startswith("INVALID_ARGUMENT"), (key, result)
        assert want in result, (key, result)


def test_limits_refuse_oversized_calls(small_exports):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    default, _ = small_exports
    model = tf.saved_model.load(default)
    text = model.signatures["score_text"]
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_batch"):
        text(sentences=tf.constant(["the cat"] * 9))
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_tokens"):
        text(sentences=tf.constant(["the cat " * 40]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_tokens"):
        model.signatures["next_token_logprobs"](
            prefixes=tf.constant(["the cat " * 40])
        )
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_tokens"):
        model.signatures["score_ids"](
            token_ids=tf.ones([2, 60], tf.int32), lengths=tf.constant([60, 1])
        )
    # Within the limits: fine, and lengths are still checked.
    r = text(sentences=tf.constant(["the cat"] * 8))
    assert r["num_tokens"].numpy().tolist() == [3] * 8
    with pytest.raises(tf.errors.InvalidArgumentError, match="one entry"):
        model.signatures["score_ids"](
            token_ids=tf.ones([2, 3], tf.int32), lengths=tf.constant([1])
        )


def test_saved_model_scorer_splits_calls_over_the_budget(small_exports):
    from keras_rnnlm.scoring.loading import SavedModelScorer

    default, _ = small_exports
    scorer = SavedModelScorer(default)
    assert scorer.batch_size == 8  # the export's max_batch_size
    sents = ["the cat sees a ball . " * 2] * 8  # 8 x 16 padded > 64
    scores = scorer.score_sentences(sents)
    assert [s.num_tokens for s in scores] == [13] * 8
