"""One compiled program per bucket of sequence lengths
(keras_rnnlm.loops.time_buckets): the same numbers as unpadded loops."""

import keras
import numpy as np
import pytest
from keras import ops
from layer_testing import randomized
from user_process import run_as_user

from keras_rnnlm.layers import LSTM
from keras_rnnlm.layers.multicell_lstm import MultiCellLSTM
from keras_rnnlm.layers.multiplicative import CELLS
from keras_rnnlm.layers.multiplicative import MultiplicativeRNN
from keras_rnnlm.loops import loop_parts as lp
from keras_rnnlm.loops import recurrence
from keras_rnnlm.loops import time_buckets as tb

pytestmark = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="buckets are TensorFlow-only (JAX jit-compiles the whole step)",
)

#: Lengths around the bucket edges (16, 32).
LENGTHS = (1, 15, 16, 17, 35)


def _tensors(shapes, seed):
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    return [tf.constant(rng.normal(size=s).astype("float32")) for s in shapes]


def test_bucket_length():
    assert tb.GRANULARITY == 16
    assert [tb.bucket_length(n) for n in (1, 15, 16, 17, 33, 70, 80)] == [
        1,  # a token at a time (generation): unpadded
        16,
        16,
        32,
        48,
        80,
        80,
    ]


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_runs_the_true_steps_of_a_padded_sequence(reverse):
    """A compiled loop on a sequence padded from 5 to 16 rows runs 5 steps
    (forward 0..4, reverse 4..0): the last carry is the one after those
    steps, and the per-step outputs past them are zeros."""
    import tensorflow as tf

    xs = np.arange(1, 6, dtype="float32")[:, None]  # (5, 1)

    def fn(xs):
        def step(carry, x):
            (total,), (x,) = carry, x
            total = total * 2.0 + x
            return (total,), (total,)

        return recurrence.scan(step, (tf.zeros((1,)),), (xs,), reverse=reverse)

    loop = tb.BucketedLoop(fn)
    (last,), (ys,) = loop(5, tb.pad_steps(tf.constant(xs), 16))
    (want_last,), (want_ys,) = fn(tf.constant(xs))  # eager, unpadded
    assert ys.shape == (16, 1)
    np.testing.assert_array_equal(ys[:5], want_ys)
    np.testing.assert_array_equal(ys[5:], 0.0)
    np.testing.assert_array_equal(last, want_last)
    # the count as an argument, outside a compiled loop
    (last3,), _ = recurrence.scan(
        lambda c, x: ((c[0] + x[0],), (c[0],)),
        (tf.zeros((1,)),),
        (tf.constant(xs),),
        reverse=reverse,
        length=3,
    )
    np.testing.assert_array_equal(last3, [1.0 + 2.0 + 3.0])  # rows 0..2


def _traces(loop):
    return loop.compiled.experimental_get_tracing_count()


def test_one_program_for_the_lengths_of_a_bucket(monkeypatch):
    """LSTM forward and backward loops and a generic fused scan at T = 33,
    35 and 40: each compiled once (one XLA program per traced shape)."""
    import tensorflow as tf

    b, h = 3, 7  # shapes no other test traces the shared loops with
    forward, backward, _ = recurrence._compiled()
    before = _traces(forward), _traces(backward)
    compiled = []

    def compile_loop(fn, original=recurrence.compile_loop):
        compiled.append(original(fn))
        return compiled[-1]

    monkeypatch.setattr(recurrence, "compile_loop", compile_loop)

    def step(x, states, weights):
        (s,), (u,) = states, weights
        s = ops.tanh(x + ops.matmul(s, u))
        return s, (s,)

    scan_loop = recurrence.make_fused_scan(step)
    for t in (33, 35, 40):
        proj, h0, c0, rk, xs, u = _tensors(
            [(b, t, 4 * h), (b, h), (b, h), (h, 4 * h), (t, b, h), (h, h)], t
        )
        with tf.GradientTape() as tape:
            tape.watch([proj, h0, c0, rk, xs, u])
            out, h_t, c_t = recurrence.lstm_recurrence(proj, h0, c0, rk)
            ys, (s_t,) = scan_loop(xs, (h0,), (u,))
            loss = sum(tf.reduce_sum(v) for v in (out, h_t, c_t, ys, s_t))
        tape.gradient(loss, [proj, h0, c0, rk, xs, u])
    assert (_traces(forward), _traces(backward)) == (
        before[0] + 1,
        before[1] + 1,
    )
    # the fused scan's forward, backward and (unused) forward-only loops
    assert [_traces(loop) for loop in compiled] == [1, 1, 0]


# A train step's LSTM (forward and backward loops) at three lengths of one
# bucket, the time dimension unknown in the graph; XLA dumps every program
# it compiles (``--xla_dump_to``) into ARGV[1].
_DYNAMIC_LENGTHS = """
import os, sys
import numpy as np
import tensorflow as tf
from keras_rnnlm.loops.recurrence import lstm_recurrence

b, h = 3, 4
rng = np.random.default_rng(0)
h0, c0, rk = (
    tf.constant(rng.normal(size=s).astype("float32"))
    for s in [(b, h), (b, h), (h, 4 * h)]
)

@tf.function(input_signature=[tf.TensorSpec((b, None, 4 * h))])
def step(proj):
    with tf.GradientTape() as tape:
        tape.watch(proj)
        out, h_t, c_t = lstm_recurrence(proj, h0, c0, rk)
        loss = tf.reduce_sum(out) + tf.reduce_sum(h_t + c_t)
    return tape.gradient(loss, proj)

for t in (33, 35, 40):
    step(tf.constant(rng.normal(size=(b, t, 4 * h)).astype("float32")))
programs = {
    name.split(".")[1]  # module_NNNN.<function>.<n>.<stage>.txt
    for name in os.listdir(sys.argv[1])
    if name.endswith(".before_optimizations.txt")
}
print("functions", len(programs))
print("programs", sum(
    name.endswith(".before_optimizations.txt")
    for name in os.listdir(sys.argv[1])
))
"""


@pytest.mark.slow
def test_a_graph_with_unknown_length_compiles_once_per_bucket(tmp_path):
    """In a graph whose time dimension is unknown (Keras's train step
    after two lengths), XLA compiles each loop once per *shape* it
    receives: one program per loop function for T = 33, 35, 40."""
    script = tmp_path / "lengths.py"
    script.write_text(_DYNAMIC_LENGTHS)
    dump = tmp_path / "xla"
    done = run_as_user(
        [str(script), str(dump)],
        KERAS_BACKEND="tensorflow",
        TF_CPP_MIN_LOG_LEVEL="3",
        XLA_FLAGS=f"--xla_dump_to={dump}",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = dict(line.split() for line in done.stdout.splitlines())
    assert int(lines["functions"]) >= 2  # the forward and backward loops
    assert lines["programs"] == lines["functions"]


def _same_as_unpadded(monkeypatch, run):
    """``run()`` (a list of tensors) with the loops padded to their bucket
    equals ``run()`` with no padding (a bucket per length), bit for bit:
    each step does the same float32 operations on the same rows."""
    padded = [np.asarray(v) for v in run()]
    monkeypatch.setattr(tb, "GRANULARITY", 1)
    unpadded = [np.asarray(v) for v in run()]
    assert len(padded) == len(unpadded)
    for a, b in zip(padded, unpadded):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("mode", ["eager", "dynamic"])
@pytest.mark.parametrize("forward_only", [False, True])
@pytest.mark.parametrize("t", LENGTHS)
def test_lstm_recurrence_equals_the_unpadded_loop(
    monkeypatch, t, forward_only, mode
):
    """Eagerly, and in a graph whose time dimension is unknown (a train
    step's, the true length a runtime value)."""
    import tensorflow as tf

    b, h = 4, 5
    args = _tensors([(b, t, 4 * h), (b, h), (b, h), (h, 4 * h)], t)

    def run(proj):
        inputs = [proj, *args[1:]]
        if forward_only:  # not differentiable on TensorFlow: no tape
            return recurrence.lstm_recurrence(*inputs, forward_only=True)
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            out, h_t, c_t = recurrence.lstm_recurrence(*inputs)
            loss = tf.reduce_sum(out * out) + tf.reduce_sum(h_t + 2 * c_t)
        return [out, h_t, c_t, *tape.gradient(loss, inputs)]

    if mode == "dynamic":
        run = tf.function(
            run, input_signature=[tf.TensorSpec((b, None, 4 * h))]
        )
    _same_as_unpadded(monkeypatch, lambda: run(args[0]))


@pytest.mark.parametrize("forward_only", [False, True])
@pytest.mark.parametrize("t", LENGTHS)
def test_fused_scan_equals_the_unpadded_loop(monkeypatch, t, forward_only):
    import tensorflow as tf

    def step(x, states, weights):
        (s, q), (u,) = states, weights
        s = ops.tanh(x + ops.matmul(s, u) + 0.5 * q)
        return s, (s, q * 0.9 + s)

    loop = recurrence.make_fused_scan(step)
    xs, s0, q0, u = _tensors([(t, 3, 4), (3, 4), (3, 4), (4, 4)], t)

    def run():
        if forward_only:  # not differentiable on TensorFlow: no tape
            ys, (s_t, q_t) = loop(xs, (s0, q0), (u,), forward_only=True)
            return [ys, s_t, q_t]
        with tf.GradientTape() as tape:
            tape.watch([xs, s0, q0, u])
            ys, (s_t, q_t) = loop(xs, (s0, q0), (u,))
            loss = tf.reduce_sum(ys * ys) + tf.reduce_sum(s_t + 3 * q_t)
        return [ys, s_t, q_t, *tape.gradient(loss, [xs, s0, q0, u])]

    _same_as_unpadded(monkeypatch, run)


def _layers():
    kw = dict(return_sequences=True, return_state=True)
    return {
        "lstm": lambda: LSTM(5, **kw),
        "mlstm": lambda: MultiplicativeRNN(CELLS["mlstm"](5), **kw),
        "tmgru": lambda: MultiplicativeRNN(CELLS["tmgru"](5), **kw),
        "mrnn": lambda: MultiplicativeRNN(CELLS["mrnn"](5), **kw),
        "multicell": lambda: MultiCellLSTM(
            5, num_cells=3, strategy="max", **kw
        ),
    }


@pytest.mark.parametrize("graph_parts", [None, "2"])
@pytest.mark.parametrize("name", sorted(_layers()))
def test_layers_equal_the_unpadded_loops(monkeypatch, name, graph_parts):
    """Every fused training loop (hand-written backward passes included):
    outputs, final states and every gradient at T = 17, eagerly and in a
    graph as two row blocks (the padded saved states kept as blocks)."""
    import tensorflow as tf

    t, b, d = 17, 4, 3
    layer = randomized(_layers()[name](), (b, t, d), seed=1)
    (x,) = _tensors([(b, t, d)], 2)

    def run():
        with tf.GradientTape() as tape:
            tape.watch(x)
            out, *states = layer(x, training=True)
            loss = tf.reduce_sum(out**2) + sum(
                (k + 2) * tf.reduce_sum(s) for k, s in enumerate(states)
            )
        grads = tape.gradient(loss, [x, *layer.trainable_variables])
        return [out, *states, *grads]

    if graph_parts is not None:
        monkeypatch.setenv(lp.ENV, graph_parts)
        _same_as_unpadded(monkeypatch, lambda: tf.function(run)())
    else:
        _same_as_unpadded(monkeypatch, run)
