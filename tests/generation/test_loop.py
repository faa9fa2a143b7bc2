"""The compiled generation loop against step-by-step references: the
greedy chain, the scorer's log-probabilities (plain, with the cache
pointer, a CBOW context and sentence resets), prompts of different
lengths in one batch, stop tokens and lengths."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_rnnlm.cache_pointer import CacheConfig
from keras_rnnlm.config import ModelConfig
from keras_rnnlm.data.vocabulary import Vocabulary
from keras_rnnlm.generation import GenerationLoop
from keras_rnnlm.generation import GreedySampler
from keras_rnnlm.generation import RandomSampler
from keras_rnnlm.generation import TopKSampler
from keras_rnnlm.generation import prefill_length
from keras_rnnlm.generation import reset_token_ids
from keras_rnnlm.models import build_language_model
from keras_rnnlm.scoring.scorer import Scorer

V = 24
VOCAB = Vocabulary(["<eos>", "<unk>", ".", *(f"w{i}" for i in range(V - 3))])
PROMPTS = ["w3 w4 w5 w6 w7", "", "w8 w9", "w1 w2 w3 w4 w5 w6 w7 w8 w9 w10"]


def _scorer(context=None, sentence_reset=None, seed=1, init_range=0.6):
    cfg = ModelConfig(
        embedding_dim=6,
        hidden_sizes=[8, 8],
        init_range=init_range,
        context=context,
    )
    model = build_language_model(cfg, V, None, stateful=False, seed=seed)
    return Scorer(model, VOCAB, sentence_reset=sentence_reset)


@pytest.fixture(scope="module")
def scorer():
    return _scorer()


def _inputs(scorer, texts):
    bos = scorer.begin().last_token
    return [[bos, *scorer.encode(t)[1].tolist()] for t in texts]


_LOOPS = {}


def _run(scorer, texts, sampler, max_tokens=8, seed=3, stop_id=-1,
         cache=None):  # fmt: skip
    """The scorer's model's generation loop (one per scorer: its traces
    kept) on ``texts``."""
    loop = _LOOPS.get(id(scorer))
    if loop is None or loop.inference is not scorer.inference:
        loop = GenerationLoop(
            scorer.inference, reset_token_ids(VOCAB, scorer.sentence_reset)
        )
        _LOOPS[id(scorer)] = loop
    return loop(_inputs(scorer, texts), sampler, max_tokens, seed, stop_id,
                cache)  # fmt: skip


def _log_softmax(logits):
    logits = np.asarray(logits, np.float64)
    top = logits.max(-1, keepdims=True)
    return logits - top - np.log(np.exp(logits - top).sum(-1, keepdims=True))


def test_greedy_is_the_argmax_chain_of_the_whole_sequence(scorer):
    """Each greedy token is the argmax of the model run over the whole
    sequence so far from the initial state (a separate forward pass per
    step), with that token's log-probability."""
    out = _run(scorer, PROMPTS, GreedySampler(), max_tokens=6)
    inference = scorer.inference
    for inputs, row_ids, row_lp in zip(
        _inputs(scorer, PROMPTS), out["token_ids"], out["log_probs"]
    ):
        seq = list(inputs)
        for token, lp in zip(row_ids, row_lp):
            logits, _ = inference(np.array([seq]), inference.initial_states(1))
            ref = _log_softmax(ops.convert_to_numpy(logits)[0, -1])
            assert token == ref.argmax()
            assert abs(lp - ref[token]) < 1e-4
            seq.append(int(token))
    assert (out["num_tokens"] == 6).all() and not out["stopped"].any()


@pytest.mark.parametrize(
    "sampler", [GreedySampler(), RandomSampler(), TopKSampler(4)]
)
def test_a_row_is_the_same_among_rows_of_other_lengths(scorer, sampler):
    """No padding reaches a row's state, and a row's noise is its own
    (keyed by ``(seed, position, row)``): each prompt's continuation at
    row ``r`` is the same among the other prompts as among ``r`` empty
    prompts (other lengths, another batch size)."""
    batch = _run(scorer, PROMPTS, sampler)
    for row in range(len(PROMPTS)):
        other = _run(scorer, [""] * row + [PROMPTS[row]], sampler)
        np.testing.assert_array_equal(
            other["token_ids"][row], batch["token_ids"][row]
        )
        np.testing.assert_allclose(
            other["log_probs"][row], batch["log_probs"][row], atol=1e-5
        )


def _continuations(out):
    return [
        " ".join(VOCAB.decode(ids[:n])) for ids, n in zip(
            out["token_ids"], out["num_tokens"]
        )
    ]  # fmt: skip


def test_log_probs_are_the_scorers(scorer):
    """The log-probability recorded with each sampled token is the one
    the batched scorer gives the continuation after the prompt."""
    out = _run(scorer, PROMPTS, RandomSampler(0.9), max_tokens=7)
    texts = [f"{p} {c}" for p, c in zip(PROMPTS, _continuations(out))]
    for r, lp, n in zip(
        scorer.score_sentences(texts, bos=True, eos=False),
        out["log_probs"],
        out["num_tokens"],
    ):
        np.testing.assert_allclose(lp[:n], r.ln_probs[-n:], atol=1e-4)


def test_same_seed_same_tokens_other_seed_other_tokens(scorer):
    sampler = RandomSampler(1.5)
    a = _run(scorer, PROMPTS, sampler, max_tokens=12, seed=5)
    b = _run(scorer, PROMPTS, sampler, max_tokens=12, seed=5)
    c = _run(scorer, PROMPTS, sampler, max_tokens=12, seed=6)
    np.testing.assert_array_equal(a["token_ids"], b["token_ids"])
    assert not np.array_equal(a["token_ids"], c["token_ids"])
    assert ((a["token_ids"] >= 0) & (a["token_ids"] < V)).all()


def test_a_row_ends_at_the_stop_token_or_after_max_tokens(scorer):
    stop = VOCAB.token_to_id("w3")
    out = _run(scorer, PROMPTS * 8, RandomSampler(2.0), 10, 1, stop)
    ids, num, stopped = out["token_ids"], out["num_tokens"], out["stopped"]
    assert stopped.any() and not stopped.all()
    for row in range(len(ids)):
        assert stop not in ids[row, : num[row]]
        assert (ids[row, num[row] :] == -1).all()
        assert num[row] == 10 or stopped[row]
        assert (out["log_probs"][row, num[row] :] == 0).all()


def test_max_tokens_zero_is_an_empty_continuation(scorer):
    out = _run(scorer, PROMPTS, RandomSampler(), max_tokens=0)
    assert out["token_ids"].shape == (len(PROMPTS), 0)
    assert (out["num_tokens"] == 0).all() and not out["stopped"].any()


def test_with_a_cache_the_log_probs_are_the_cached_scorers(scorer):
    """The cache's memory is carried through the loop as the scorer
    carries it through a document: a window smaller than prompt and
    continuation, the prompt's keys in the memory first."""
    cache = CacheConfig(window=5, theta=2.0, lam=0.4)
    out = _run(scorer, PROMPTS, RandomSampler(), 9, cache=cache)
    plain = _run(scorer, PROMPTS, RandomSampler(), 9)
    assert not np.allclose(out["log_probs"], plain["log_probs"], atol=1e-3)
    for prompt, text, lp, n in zip(
        PROMPTS, _continuations(out), out["log_probs"], out["num_tokens"]
    ):
        (r,) = scorer.score_document([f"{prompt} {text}"], cache, eos=False)
        np.testing.assert_allclose(lp[:n], r.ln_probs[-n:], atol=1e-4)


def test_a_cbow_context_is_carried():
    scorer = _scorer(context={"weighting": "positional", "window": 4})
    assert "token_ids" in scorer.inference.state_kinds
    out = _run(scorer, PROMPTS, RandomSampler(), 9)
    texts = [f"{p} {c}" for p, c in zip(PROMPTS, _continuations(out))]
    for r, lp, n in zip(
        scorer.score_sentences(texts, eos=False),
        out["log_probs"],
        out["num_tokens"],
    ):
        np.testing.assert_allclose(lp[:n], r.ln_probs[-n:], atol=1e-4)


def test_a_sentence_level_model_resets_before_each_sentence():
    """The recurrent states restart before every input that starts a
    sentence, in the prompt and in the continuation, as in the scorer's
    streaming (the CBOW context carries on)."""
    context = {"weighting": "uniform", "window": 3}
    scorer = _scorer(context=context, sentence_reset="line")
    prompts = ["w3 w4 <eos> w5 w6 <eos> w7", "w9 <eos>", "w3"]
    out = _run(scorer, prompts, RandomSampler(1.5), 30, seed=2)
    eos = VOCAB.eos_id
    assert (out["token_ids"] == eos).any()  # resets in the continuations
    texts = [f"{p} {c}" for p, c in zip(prompts, _continuations(out))]
    for scoring in (scorer, _scorer(context=context)):
        same = []
        for text, lp, n in zip(texts, out["log_probs"], out["num_tokens"]):
            _, r = scoring.continue_(scoring.begin(), text)
            same.append(np.allclose(lp[:n], r.ln_probs[-n:], atol=1e-4))
        # equal to the resetting scorer's only
        assert all(same) == (scoring is scorer)


def test_the_prefill_stops_before_the_first_reset_after_the_start():
    ids = np.array([[0, 4, 5, 0, 6], [0, 7, 8, 9, 2]], np.int32)
    lengths = np.array([5, 4], np.int32)
    assert int(prefill_length(ids, lengths)) == 4
    assert int(prefill_length(ids, lengths, [0])) == 3  # the <eos> at 3
    assert int(prefill_length(ids, lengths, [0, 2])) == 3  # 2 is padding
    assert int(prefill_length(ids, np.array([1, 4]), [0])) == 1


#: The TensorFlow ops of the traced loop (a portable inference graph, every
#: sampler, with and without the cache): all TensorFlow's own kernels,
#: which a stock TF Serving has. A new op fails the test on purpose.
LOOP_OPS = {
    "AddV2", "All", "Any", "ArgMax", "BiasAdd", "Bitcast", "BitwiseAnd",
    "BitwiseXor", "BroadcastTo", "Cast", "ConcatV2", "Const", "Cumsum",
    "Einsum",
    "Equal", "Exp", "ExpandDims", "Fill", "FloorDiv", "GatherV2",
    "GreaterEqual", "Identity", "If", "IsFinite", "Less", "LessEqual", "Log",
    "LogSoftmax", "LogicalAnd", "LogicalNot", "LogicalOr", "MatMul", "Max",
    "Maximum", "Minimum", "Mul", "Neg", "NoOp", "Pack", "Pad",
    "Placeholder", "Prod", "Range", "ReadVariableOp", "RealDiv", "Reshape",
    "ResourceGather", "RightShift", "SelectV2", "Shape", "Sigmoid", "Split",
    "StopGradient", "StridedSlice", "Sub",
    "Sum", "Tanh", "TensorListFromTensor", "TensorListGetItem",
    "TensorListReserve", "TensorListSetItem", "TensorListStack", "TopKV2",
    "Transpose", "UnsortedSegmentSum", "While", "ZerosLike",
}  # fmt: skip


def _traced_ops(inference, sampler, cache):
    """The op types and the XLA-must-compile functions of
    :func:`generate_ids` traced in a ``tf.function`` (dynamic batch,
    width, length, seed and prefill)."""
    import tensorflow as tf

    from keras_rnnlm.generation import generate_ids

    def fn(ids, lengths, seed, max_tokens, prefill):
        return generate_ids(
            inference, sampler, ids, lengths,
            max_tokens=max_tokens, seed=seed, prefill=prefill,
            stop_id=0, reset_ids=[0], cache=cache,
        )  # fmt: skip

    scalar = tf.TensorSpec([], tf.int32)
    spec = [
        tf.TensorSpec([None, None], tf.int32),
        tf.TensorSpec([None], tf.int32),
        *[scalar] * 3,
    ]
    graph = (
        tf.function(fn, input_signature=spec, autograph=False)
        .get_concrete_function()
        .graph.as_graph_def()
    )
    found, xla = {n.op for n in graph.node}, []
    for f in graph.library.function:
        found.update(n.op for n in f.node_def)
        if f.attr["_XlaMustCompile"].b:
            xla.append(f.signature.name)
    return found, xla


def test_the_loop_traces_to_stock_tensorflow_ops():
    """What the export's generate signature will hold: one tf.function
    over the portable graph (a CBOW context too), every sampler, with or
    without the cache; no XLA-must-compile function."""
    if keras.backend.backend() != "tensorflow":
        pytest.skip("traces a tf.function")
    from tensorflow.python.framework import op_def_registry

    from keras_rnnlm.generation import get_sampler
    from keras_rnnlm.inference_model import build_inference_model

    context = {"weighting": "positional", "window": 4}
    inference = build_inference_model(
        _scorer(context=context).model, portable=True
    )
    seen = set()
    with_cache = CacheConfig(5, 1.0, 0.3)
    for sampler, cache in (
        (get_sampler("greedy"), None),
        (get_sampler("random"), with_cache),
        (get_sampler("top_k", k=3), None),
        (get_sampler("top_p", k=3), with_cache),
    ):
        found, xla = _traced_ops(inference, sampler, cache)
        assert xla == []
        seen |= found
    assert seen - LOOP_OPS == set()
    assert all(op_def_registry.get(op) is not None for op in seen)


class _CountingInference:
    """An inference graph that counts the inputs its model reads (a
    variable added to in the graph, so only the steps that run count)."""

    def __init__(self, inference):
        self._inference = inference
        self.read = keras.Variable(0, dtype="int32", trainable=False)

    def __getattr__(self, name):
        return getattr(self._inference, name)

    def at_positions(self, tokens, positions, states):
        self.read.assign_add(ops.size(tokens))
        return self._inference.at_positions(tokens, positions, states)


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="counts in the graph with a variable (TensorFlow)",
)
@pytest.mark.parametrize("max_tokens", [1, 5])
def test_the_last_token_is_sampled_without_running_the_model(
    scorer, max_tokens
):
    """A row of P prompt inputs and N tokens reads P + N - 1 inputs: the
    last sampled token is not fed (for one token: the prompt's reading
    and a sampling, as first-token latency wants)."""
    counting = _CountingInference(scorer.inference)
    loop = GenerationLoop(counting)
    prompt = _inputs(scorer, ["w3 w4 w5"])
    out = loop(prompt, GreedySampler(), max_tokens, 0)
    assert int(out["num_tokens"][0]) == max_tokens
    assert int(counting.read.numpy()) == len(prompt[0]) + max_tokens - 1


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="the traces of TensorFlow's generation loop",
)
@pytest.mark.slow
def test_a_batch_whose_loops_split_gets_its_own_bounded_trace(
    scorer, monkeypatch
):
    """Where the recurrent loops run as row blocks (forced here: two
    blocks) a batch of two or more gets a trace of its own static batch
    (its loops split), which samples the tokens of the dynamic trace;
    a batch of one shares the dynamic one, and the traces kept are
    bounded."""
    from keras_rnnlm.generation import loop as loop_module
    from keras_rnnlm.loops import loop_parts

    texts = PROMPTS + ["w5 w6", "w7", "w2 w3 w4"]
    plain = GenerationLoop(scorer.inference)
    expected = plain(_inputs(scorer, texts), RandomSampler(), 6, 11)
    monkeypatch.setenv(loop_parts.ENV, "2")
    split = GenerationLoop(scorer.inference)
    out = split(_inputs(scorer, texts), RandomSampler(), 6, 11)
    np.testing.assert_array_equal(out["token_ids"], expected["token_ids"])
    np.testing.assert_allclose(out["log_probs"], expected["log_probs"],
                               atol=1e-5)  # fmt: skip
    traces = split._compiled.get((RandomSampler(), -1, None)).traces
    assert traces.keys() == [len(texts)]
    split(_inputs(scorer, texts[:1]), RandomSampler(), 2, 1)
    assert traces.keys() == [len(texts), None]
    for batch in range(4, 4 + loop_module.MAX_BATCH_TRACES):
        split(_inputs(scorer, texts[:batch]), RandomSampler(), 2, 1)
    assert len(traces) == loop_module.MAX_BATCH_TRACES
    assert traces.keys()[-1] == 3 + loop_module.MAX_BATCH_TRACES


@pytest.mark.slow
def test_the_loops_kept_for_sampler_settings_are_bounded(scorer, monkeypatch):
    """A long-lived process generating with ever new sampler settings
    (a temperature a request) keeps a bounded number of compiled loops,
    the most recently used; a dropped one is compiled again when asked
    (the bound lowered to 3 here: each setting compiles a loop)."""
    from keras_rnnlm.generation import loop as loop_module

    monkeypatch.setattr(loop_module, "MAX_LOOPS", 3)
    loop = GenerationLoop(scorer.inference)
    prompt = _inputs(scorer, ["w3 w4"])
    first = loop(prompt, RandomSampler(temperature=0.5), 2, 1)
    for i in range(loop_module.MAX_LOOPS + 3):
        loop(prompt, RandomSampler(temperature=1.0 + i), 2, 1)
    assert len(loop._compiled) == loop_module.MAX_LOOPS
    again = loop(prompt, RandomSampler(temperature=0.5), 2, 1)
    np.testing.assert_array_equal(again["token_ids"], first["token_ids"])
    assert len(loop._compiled) == loop_module.MAX_LOOPS


def test_bucket_and_floor_power():
    from keras_rnnlm.generation.loop import bucket
    from keras_rnnlm.generation.loop import floor_power

    assert [bucket(n, 1) for n in (1, 2, 3, 5, 64)] == [1, 2, 4, 8, 64]
    assert [bucket(n, 32, 4) for n in (1, 32, 33, 129)] == [32, 32, 128, 512]
    assert [floor_power(n, 4) for n in (1, 3, 4, 21, 64)] == [1, 1, 4, 16, 64]


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="TensorFlow's XLA program of the generation loop",
)
@pytest.mark.parametrize("sentence_reset", [None, "line"])
@pytest.mark.slow
def test_the_whole_program_samples_the_graphs_tokens(sentence_reset):
    """One XLA program (rows, prompt width and output columns rounded up,
    the prompt partly read one input a step) samples the tokens of the
    graph's loop, with their log-probabilities, for prompts of mixed
    lengths, batches of 1 to 5, a stop token and no tokens at all; the
    temperature and the stop token are inputs (one program a sampler
    class); a top-k sampler, a cache or a call beyond the limits runs
    in the graph."""
    from keras_rnnlm.generation import loop as loop_module

    scorer = _scorer(sentence_reset=sentence_reset)
    reset_ids = reset_token_ids(VOCAB, sentence_reset)
    graph = GenerationLoop(scorer.inference, reset_ids)
    whole = GenerationLoop(scorer.inference, reset_ids, whole_program=True)
    texts = PROMPTS + ["w5 <eos> w6", "w7"]
    cases = [
        (texts[:1], GreedySampler(), 9, -1),
        (texts[:5], RandomSampler(0.7), 20, -1),
        (texts[2:6], RandomSampler(1.3), 13, VOCAB.eos_id),
        (texts[:3], RandomSampler(1.3), 0, -1),
    ]
    for seed, (prompts, sampler, max_tokens, stop_id) in enumerate(cases):
        args = (_inputs(scorer, prompts), sampler, max_tokens, seed, stop_id)
        want, got = graph(*args), whole(*args)
        assert set(got) == set(want)
        for key in ("token_ids", "num_tokens", "stopped"):
            np.testing.assert_array_equal(got[key], want[key])
        np.testing.assert_allclose(
            got["log_probs"], want["log_probs"], atol=1e-5
        )
    assert set(whole._programs) == {GreedySampler, RandomSampler}
    prompt = _inputs(scorer, ["w3"])
    assert whole._whole_program(TopKSampler(3), None, (1, 2), 4) is None
    cache = CacheConfig(window=4, theta=0.5, lam=0.2)
    assert whole._whole_program(RandomSampler(), cache, (1, 2), 4) is None
    rows, _, columns = (high for _, _, high in loop_module.WHOLE_PROGRAM_SHAPES)
    for shape, n in (((rows + 1, 2), 4), ((1, 2), columns + 1)):
        assert whole._whole_program(RandomSampler(), None, shape, n) is None
    assert whole._whole_program(RandomSampler(), None, (rows, 2), columns)
    assert whole(prompt, RandomSampler(), 3, 1)["token_ids"].shape == (1, 3)
