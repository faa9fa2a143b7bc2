"""The compiled loops run as concurrent row blocks of the batch
(keras_rnnlm.loops.loop_parts)."""

import keras
import numpy as np
import pytest
from keras import ops
from layer_testing import randomized

from keras_rnnlm.config import ConfigError
from keras_rnnlm.layers.multicell_lstm import MultiCellLSTM
from keras_rnnlm.layers.multiplicative import CELLS
from keras_rnnlm.layers.multiplicative import MultiplicativeRNN
from keras_rnnlm.loops import loop_parts as lp
from keras_rnnlm.loops.multiplicative_backward import HAND_WRITTEN
from keras_rnnlm.loops.recurrence import lstm_recurrence
from keras_rnnlm.loops.recurrence import make_fused_scan

tf_only = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="the split is TensorFlow-only (tf.function graphs)",
)


def _in_graph(fn):
    import tensorflow as tf

    return tf.function(fn, autograph=False)()


@tf_only
def test_eager_calls_are_never_split(monkeypatch):
    monkeypatch.setenv(lp.ENV, "4")
    assert lp.loop_parts(20, 1600) == 1


@tf_only
def test_the_choice_in_a_graph(monkeypatch):
    monkeypatch.delenv(lp.ENV, raising=False)
    monkeypatch.setattr(lp, "inter_op_threads", lambda: 2)
    parts = _in_graph(
        lambda: [
            lp.loop_parts(10, 400 * 1600),  # small steps: split
            lp.loop_parts(1, 400 * 1600),  # one row
            lp.loop_parts(3, 400 * 1600),  # 2 rows a block at least
            lp.loop_parts(None, 400 * 1600),  # dynamic batch
            lp.loop_parts(20, 1150 * 4600),  # a large step: XLA threads it
        ]
    )
    assert parts == [2, 1, 1, 1, 1]
    monkeypatch.setattr(lp, "inter_op_threads", lambda: 1)
    assert _in_graph(lambda: lp.loop_parts(10, 1600)) == 1


@tf_only
def test_loops_of_the_evaluators_window_loop(monkeypatch):
    """In the Evaluator's graph window loop a model of several layers
    (windows overlapping) runs its loops whole, one of a single layer as
    row blocks even when its steps are large; the environment's override
    still wins."""
    monkeypatch.delenv(lp.ENV, raising=False)
    monkeypatch.setattr(lp, "inter_op_threads", lambda: 2)

    def parts(layers, step_weights):
        def run():
            with lp.window_loop(layers):
                inside = lp.loop_parts(32, step_weights)
            return [inside, lp.loop_parts(32, step_weights)]

        return _in_graph(run)

    assert parts(3, 400 * 1600) == [1, 2]
    assert parts(1, 400 * 1600) == [2, 2]
    assert parts(1, 1150 * 4600) == [2, 1]
    monkeypatch.setenv(lp.ENV, "3")
    assert parts(3, 400 * 1600) == [3, 3]


@tf_only
def test_the_environment_overrides_and_is_checked(monkeypatch):
    monkeypatch.setattr(lp, "inter_op_threads", lambda: 2)
    monkeypatch.setenv(lp.ENV, "3")
    assert _in_graph(lambda: lp.loop_parts(20, 1150 * 4600)) == 3
    assert _in_graph(lambda: lp.loop_parts(2, 1600)) == 2  # <= the rows
    monkeypatch.setenv(lp.ENV, "1")
    assert _in_graph(lambda: lp.loop_parts(20, 1600)) == 1
    monkeypatch.setenv(lp.ENV, "two")
    with pytest.raises(ValueError, match=lp.ENV) as raised:
        _in_graph(lambda: lp.loop_parts(20, 1600))
    # a user error under the CLI's one-line policy
    assert isinstance(raised.value, ConfigError)


def test_inter_op_threads_reads_the_environment(monkeypatch):
    if keras.backend.backend() != "tensorflow":
        pytest.skip("TensorFlow's pools")
    import tensorflow as tf

    if tf.config.threading.get_inter_op_parallelism_threads():
        pytest.skip("set through tf.config in this process")
    monkeypatch.setenv("TF_NUM_INTEROP_THREADS", "3")
    assert lp.inter_op_threads() == 3
    monkeypatch.delenv("TF_NUM_INTEROP_THREADS")
    assert lp.inter_op_threads() >= 1


@tf_only
def test_run_in_parts_splits_joins_and_sums():
    x = np.arange(5 * 2, dtype="float32").reshape(5, 2)  # 5 rows: 3 + 2
    t = np.arange(4 * 5, dtype="float32").reshape(4, 5)  # batch on axis 1
    w = np.float32(10.0)
    rows = []

    def fn(x, pair, w):
        rows.append(x.shape[0])
        t, t2 = pair
        return x * w, ops.transpose(t + t2), ops.sum(x, axis=0)

    out = lp.run_in_parts(fn, 2, (x, (t, 2 * t), w), (0, 1, None), (0, 0, None))
    assert rows == [3, 2]
    np.testing.assert_array_equal(out[0], x * 10)
    np.testing.assert_array_equal(out[1], 3 * t.T)
    np.testing.assert_array_equal(out[2], x.sum(axis=0))
    whole = lp.run_in_parts(
        fn, 1, (x, (t, 2 * t), w), (0, 1, None), (0, 0, None)
    )
    assert rows[2:] == [5]  # one call on the whole batch
    np.testing.assert_array_equal(whole[0], out[0])


@tf_only
def test_kept_blocks_go_to_the_next_call_without_joining():
    """An output kept as row blocks (``Keep``) is handed to a later call
    block by block; inputs split once (``split_blocks``) likewise."""
    seq = np.arange(3 * 5 * 2, dtype="float32").reshape(3, 5, 2)  # (T, B, F)
    seen = []

    def forward(xs):
        seen.append(xs.shape[1])
        return xs * 2.0, xs + 1.0

    xs = lp.split_blocks(seq, 2, 1)
    assert [b.shape[1] for b in xs.blocks] == [3, 2]
    doubled, kept = lp.run_in_parts(forward, 2, (xs,), (1,), (1, lp.Keep(1)))
    np.testing.assert_array_equal(doubled, seq * 2.0)
    assert isinstance(kept, lp.Blocks) and len(kept.blocks) == 2
    np.testing.assert_array_equal(lp.last_step(kept), seq[-1] + 1.0)

    def backward(xs, kept, h):
        return (xs + kept + h[None],)

    h = np.ones((5, 2), "float32")
    (out,) = lp.run_in_parts(backward, 2, (xs, kept, h), (1, 1, 0), (1,))
    np.testing.assert_array_equal(out, 2 * seq + 2.0)
    with pytest.raises(ValueError, match="2 kept blocks given to 3 parts"):
        lp.run_in_parts(backward, 3, (seq, kept, h), (1, 1, 0), (1,))
    # one part: a batch-major tensor itself, and last_step of a tensor is
    # x[-1]; a time-major one padded to its bucket for the compiled loops
    assert lp.split_blocks(h, 1, 0) is h
    np.testing.assert_array_equal(lp.last_step(seq), seq[-1])
    padded = lp.split_blocks(seq, 1, 1)
    assert padded.steps == 3 and padded.blocks[0].shape == (16, 5, 2)
    np.testing.assert_array_equal(lp.whole(padded), seq)
    np.testing.assert_array_equal(lp.last_step(padded), seq[-1])
    np.testing.assert_array_equal(padded.blocks[0][3:], 0.0)
    # a loop that is not bucketed gets the true steps
    (out,) = lp.run_in_parts(backward, 1, (padded, seq, h), (1, 1, 0), (1,))
    np.testing.assert_array_equal(out, 2 * seq + 1.0)


def _loop_calls(fn):
    """The compiled-loop calls in ``fn``'s graph (and its gradient's)."""
    import tensorflow as tf

    graph = tf.function(fn).get_concrete_function().graph
    calls = [
        op
        for op in graph.get_operations()
        if op.type in ("PartitionedCall", "StatefulPartitionedCall")
    ]
    return len(calls)


def _assert_split_matches_whole(monkeypatch, run, parts="2"):
    """``run`` traced with its loops whole and as ``parts`` row blocks
    (``KERAS_RNNLM_LOOP_PARTS``, read when a step is traced): more loop
    calls in the graph, the same results."""
    import tensorflow as tf

    results, calls = {}, {}
    for n in ("1", parts):
        monkeypatch.setenv(lp.ENV, n)
        calls[n] = _loop_calls(run)
        results[n] = tf.function(run)()
    assert calls[parts] > calls["1"]
    for a, b in zip(results["1"], results[parts]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _lstm_run(proj, h0, c0, rk, forward_only):
    import tensorflow as tf

    def run():
        with tf.GradientTape() as tape:
            tape.watch([proj, h0, c0, rk])
            out, h_t, c_t = lstm_recurrence(
                proj, h0, c0, rk, forward_only=forward_only
            )
            loss = tf.reduce_sum(out * out) + tf.reduce_sum(h_t + 2 * c_t)
        if forward_only:
            return out, h_t, c_t
        return (out, h_t, c_t, *tape.gradient(loss, [proj, h0, c0, rk]))

    return run


@tf_only
@pytest.mark.parametrize("forward_only", [False, True])
def test_lstm_blocks_give_the_whole_batch_results(monkeypatch, forward_only):
    import tensorflow as tf

    rng = np.random.default_rng(0)
    b, t, h = 5, 7, 6
    args = [
        tf.constant(rng.normal(size=s).astype("float32"))
        for s in [(b, t, 4 * h), (b, h), (b, h), (h, 4 * h)]
    ]
    # forward (+ backward) loops: one call each, or one per block
    _assert_split_matches_whole(monkeypatch, _lstm_run(*args, forward_only))


@tf_only
@pytest.mark.parametrize("forward_only", [False, True])
def test_fused_scan_blocks_give_the_whole_batch_results(
    monkeypatch, forward_only
):
    """A generic loop (a tanh RNN): outputs, last state and the gradients,
    the shared weight's added over the blocks."""
    import tensorflow as tf

    def step(x, states, weights):
        (h,), (u,) = states, weights
        h = ops.tanh(x + ops.matmul(h, u))
        return h, (h,)

    loop = make_fused_scan(step)
    rng = np.random.default_rng(1)
    xs = tf.constant(rng.normal(size=(6, 5, 4)).astype("float32"))
    h0 = tf.constant(rng.normal(size=(5, 4)).astype("float32"))
    u = tf.constant(rng.normal(size=(4, 4)).astype("float32") * 0.5)

    def run():
        with tf.GradientTape() as tape:
            tape.watch([xs, h0, u])
            ys, (h_t,) = loop(xs, (h0,), (u,), forward_only=forward_only)
            loss = tf.reduce_sum(ys * ys) + tf.reduce_sum(h_t)
        if forward_only:
            return ys, h_t
        return (ys, h_t, *tape.gradient(loss, [xs, h0, u]))

    _assert_split_matches_whole(monkeypatch, run, parts="3")


def _assert_blocks_match(monkeypatch, layer, x, init):
    """``layer``'s outputs, states and gradients (inputs, initial states,
    weights) in a graph: the same with its training loops as two row
    blocks as with one call, and the graph has more loop calls."""
    import tensorflow as tf

    def run():
        with tf.GradientTape() as tape:
            tape.watch([x, *init])
            out, *states = layer(x, initial_state=init, training=True)
            loss = tf.reduce_sum(out**2) + sum(
                (k + 1) * tf.reduce_sum(s**2) for k, s in enumerate(states)
            )
        wanted = [x, *init, *layer.trainable_variables]
        return (out, *states, *tape.gradient(loss, wanted))

    _assert_split_matches_whole(monkeypatch, run)


def _random_inputs(shapes, seed):
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    return [tf.constant(rng.normal(size=s).astype("float32")) for s in shapes]


@tf_only
@pytest.mark.parametrize("name", sorted(HAND_WRITTEN))
def test_hand_written_loops_run_as_blocks_with_the_same_results(
    monkeypatch, name
):
    """The multiplicative cells' training loops (forward and hand-written
    reverse loop) run as row blocks too."""
    b, t, d = 5, 6, 3
    layer = randomized(
        MultiplicativeRNN(
            CELLS[name](4, intermediate_size=3),
            return_sequences=True,
            return_state=True,
        ),
        (b, t, d),
        7,
    )
    x, *init = _random_inputs(
        [(b, t, d)] + [(b, 4)] * CELLS[name].num_states, 3
    )
    _assert_blocks_match(monkeypatch, layer, x, init)


@tf_only
@pytest.mark.parametrize(
    "strategy", ["mean", "learnable_max"]
)  # the same loop plumbing for every strategy; learnable_max adds the
# cell weights' gradient over the blocks (random draws new noise a call)
def test_multicell_loops_run_as_blocks_with_the_same_results(
    monkeypatch, strategy
):
    """The multi-cell LSTM's training loops run as row blocks too (the
    learnable cell weights' gradient added over the blocks)."""
    b, t, d, units, cells = 5, 6, 3, 4, 3
    layer = randomized(
        MultiCellLSTM(
            units,
            num_cells=cells,
            strategy=strategy,
            return_sequences=True,
            return_state=True,
        ),
        (b, t, d),
        7,
    )
    x, h0, c0 = _random_inputs([(b, t, d), (b, units), (b, cells * units)], 4)
    _assert_blocks_match(monkeypatch, layer, x, [h0, c0])
