"""Running a compiled time loop as concurrent row blocks of its batch.

Why: a recurrent step's matrix product is small (``B x H`` by ``H x 4H``:
20 x 400 x 1600 for the AWD-LSTM ``cpu`` shape), and XLA:CPU gains little
or nothing from splitting one such product over the intra-op threads; at
two threads it can even be slower than at one (measured on a 2-core
machine, forward-only LSTM loop, 35 steps, H = 400: batch 10, 2.5 ms at one
thread and 2.1 ms at two; batch 2, 1.2 ms and 1.8 ms). The rows of a batch
are independent, though, so the loop can run as ``n`` separate calls on
row blocks, which TensorFlow's executor runs at the same time on its
inter-op threads: batch 10, 1.7 ms; batch 20, 3.8 -> 2.9 ms; batch 2,
1.8 -> 1.6 ms. Large steps are left whole: XLA threads them well
(H = 400, batch 80: 20.6 ms at one thread, 11.9 ms at two, 11.7 ms split)
and splitting them costs (H = 1150, batch 20: 32 ms at two threads,
42 ms split).

Only on TensorFlow inside a graph (``tf.function``: Keras's train, test
and predict steps; eager ops run one after the other, and on JAX the loops
are part of one ``jit`` program, whose independent parts XLA runs one
after the other), only with a static batch size, and only when the
inter-op pool has more than one thread.
Each row block is computed by the same loop on the same weights; the
results are those of the whole batch up to round-off in the matrix
products' blocking.

The loops of the Evaluator's graph window loop
(:mod:`keras_rnnlm.evaluation.static`), traced in :func:`window_loop`,
follow another rule: a model of several recurrent layers runs each loop
whole, since its windows overlap there (window ``w + 1``'s first layer
beside window ``w``'s later layers and decoder) and keep the threads
busy; a model of one layer, whose windows cannot overlap, runs its loop
as row blocks whatever its step size.

``KERAS_RNNLM_LOOP_PARTS`` (an integer; 1 turns the split off) overrides
the choice, for benchmarks and for machines where the default is wrong.
"""

import contextlib
import contextvars
import os

from keras import backend

from keras_rnnlm.config import ConfigError
from keras_rnnlm.loops import time_buckets

#: Rows a block keeps at least.
MIN_ROWS = 2

#: Above this many multiply-adds per step of the whole batch (batch x the
#: step's weight entries: ``B x H x 4H`` for an LSTM) the loop is not split
#: (XLA's own threading of the product then scales; see the module doc).
MAX_STEP_MACS = 32_000_000

#: The environment variable that overrides :func:`loop_parts`.
ENV = "KERAS_RNNLM_LOOP_PARTS"

_OVERLAP = contextvars.ContextVar("keras_rnnlm_overlap", default=None)


@contextlib.contextmanager
def window_loop(layers):
    """Loops traced inside belong to the Evaluator's graph window loop of
    a model of ``layers`` recurrent layers (see the module doc): several
    layers (windows overlapping), each loop one block; one layer, row
    blocks whatever the step size. :data:`ENV` still overrides. Measured
    on a 2-core AMD EPYC, two threads, PTB validation, seconds a pass
    (one block / row blocks): AWD-LSTM ``cpu`` (3 layers, batch 10)
    4.31-4.33 / 4.55-4.64; multi-cell small (2 layers, batch 20)
    2.74-2.76 / 2.86-2.93; Zaremba small (2 layers, batch 20) 2.57-2.67 /
    2.58-2.60; mLSTM (1 layer of 574, batch 32, windows one after the
    other) 3.50-3.75 / 1.94-1.95."""
    token = _OVERLAP.set("whole" if layers > 1 else "rows")
    try:
        yield
    finally:
        _OVERLAP.reset(token)


def inter_op_threads():
    """Threads of TensorFlow's inter-op pool: set through ``tf.config``,
    else ``TF_NUM_INTEROP_THREADS``, else the usable cores (TensorFlow's
    default)."""
    import tensorflow as tf  # TensorFlow backend only

    n = tf.config.threading.get_inter_op_parallelism_threads()
    if n > 0:
        return n
    env = os.environ.get("TF_NUM_INTEROP_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def large_steps(batch, step_weights):
    """Whether steps of ``batch`` rows by ``step_weights`` weight entries
    are too large to split (above :data:`MAX_STEP_MACS` multiply-adds)."""
    return batch * step_weights > MAX_STEP_MACS


def _forced_parts():
    """The row blocks :data:`ENV` forces, or ``None`` where it is unset."""
    value = os.environ.get(ENV, "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise ConfigError(
            f"{ENV} must be a positive integer (1: no split), got {value!r}"
        )
    return int(value)


def _graph_parts(batch, step_weights=0):
    """:func:`loop_parts` in a graph (the eager check left out)."""
    forced = _forced_parts()
    if forced is not None:
        return max(1, min(forced, batch))
    overlap = _OVERLAP.get()
    if overlap == "whole" or (
        overlap is None and large_steps(batch, step_weights)
    ):
        return 1
    return max(1, min(inter_op_threads(), batch // MIN_ROWS))


def loop_parts(batch, step_weights):
    """How many row blocks a loop over ``batch`` rows runs as.

    Args:
        batch: the static batch size, or ``None`` (dynamic: 1 block).
        step_weights: the weight entries one step multiplies each row by
            (``H x 4H`` for an LSTM): a step costs ``batch x step_weights``
            multiply-adds.
    """
    if backend.backend() != "tensorflow" or batch is None or batch < 2:
        return 1
    import tensorflow as tf  # TensorFlow backend only

    if tf.executing_eagerly():
        return 1  # eager ops run one after the other: nothing to gain
    return _graph_parts(batch, step_weights)


def may_split(batch, step_weights=0):
    """Whether loops over ``batch`` rows can run as row blocks in a graph:
    TensorFlow, more than one inter-op thread (or the override), at least
    two blocks' rows, and (where the largest step's ``step_weights`` is
    given) steps small enough to split (:data:`MAX_STEP_MACS`)."""
    if backend.backend() != "tensorflow" or not batch or batch < 2:
        return False
    return _graph_parts(batch, step_weights) > 1


def _block_sizes(batch, parts):
    base, extra = divmod(batch, parts)
    return [base + (i < extra) for i in range(parts)]


class Blocks:
    """A tensor kept as the row blocks one :func:`run_in_parts` call made
    (an output whose axis is :class:`Keep`), handed to the next call over
    the same blocks as they are. Why: a loop's saved states and gates are
    read only by its reverse loop, and joining them after the forward loop
    only to split them again before the reverse loop copies them twice
    (the mLSTM's gates: 29 MB a training step).

    ``steps``: for time-major blocks (axis 1) padded to a bucket length
    (:mod:`~keras_rnnlm.loops.time_buckets`), the true number of steps;
    ``None`` where the blocks are not padded.
    """

    def __init__(self, blocks, axis, steps=None):
        self.blocks = list(blocks)
        self.axis = axis
        self.steps = steps

    def last_step(self):
        """The last (true) time step of a time-major tensor kept on axis
        1, joined: ``x[T - 1]`` of the whole batch."""
        t = -1 if self.steps is None else self.steps - 1
        return _join([b[t] for b in self.blocks], self.axis - 1)

    def unpadded(self):
        """The blocks, each cut to the true steps where padded."""
        if self.steps is None:
            return self.blocks
        return [b[: self.steps] for b in self.blocks]

    def whole(self):
        """The tensor itself: the blocks joined, cut to the true steps (a
        leading-axis slice, which TensorFlow takes without a copy)."""
        return _join(self.unpadded(), self.axis)


def _join(tensors, axis):
    import tensorflow as tf  # TensorFlow backend only (loop_parts)

    return tensors[0] if len(tensors) == 1 else tf.concat(tensors, axis)


class Keep:
    """An ``out_axes`` entry of :func:`run_in_parts`: keep that output as
    its :class:`Blocks` on batch axis ``axis``."""

    def __init__(self, axis):
        self.axis = axis


def split_blocks(x, parts, axis):
    """``x`` as the :class:`Blocks` :func:`run_in_parts` would cut it into
    (for a tensor several calls read), or ``x`` itself where it would run
    one call (one part, or no static batch size) on an unpadded tensor.

    On TensorFlow a time-major ``x`` (``axis`` 1) is padded to its bucket
    length first (:mod:`~keras_rnnlm.loops.time_buckets`), once for every
    compiled loop that reads it: then the result is always
    :class:`Blocks`."""
    batch = x.shape[axis]
    pad = backend.backend() == "tensorflow" and axis == 1
    split = not (parts == 1 or batch is None or batch < parts)
    if not (pad or split):
        return x
    import tensorflow as tf  # TensorFlow backend only (loop_parts)

    steps = None
    if pad:
        steps = _length(x)
        x = time_buckets.pad_steps(x, time_buckets.bucket_length(steps))
    if not split:
        return Blocks([x], axis, steps)
    return Blocks(
        tf.split(x, _block_sizes(batch, parts), axis=axis), axis, steps
    )


def _length(x):
    """The leading (time) length of ``x``: an int where static."""
    import tensorflow as tf  # TensorFlow backend only (loop_parts)

    return x.shape[0] if x.shape[0] is not None else tf.shape(x)[0]


def last_step(x):
    """``x[-1]`` of a time-major tensor or of its :class:`Blocks` (the
    last true step where they are padded)."""
    return x.last_step() if isinstance(x, Blocks) else x[-1]


def whole(x):
    """A tensor, or the tensor its :class:`Blocks` hold (joined, cut to
    the true steps)."""
    return x.whole() if isinstance(x, Blocks) else x


def _time_args(args, axes):
    """The time-major arguments (batch axis 1), tuples flattened."""
    for arg, axis in zip(args, axes):
        if axis == 1:
            yield from arg if isinstance(arg, tuple) else (arg,)


def _true_steps(args, axes):
    """The true step count of a bucketed loop's call: from its time-major
    arguments (static where one of them says it)."""
    found = []
    for a in _time_args(args, axes):
        if isinstance(a, Blocks):
            if a.steps is not None:
                found.append(a.steps)
            else:
                found.append(_length(a.blocks[0]))
        else:
            found.append(_length(a))
    static = [n for n in found if isinstance(n, int)]
    return static[0] if static else found[0]


def _map_time_args(args, axes, fn):
    def one(a):
        return tuple(fn(v) for v in a) if isinstance(a, tuple) else fn(a)

    return tuple(
        one(arg) if axis == 1 else arg for arg, axis in zip(args, axes)
    )


def _bucketed_args(args, axes, steps):
    """The time-major tensors padded to the bucket of ``steps``; kept
    :class:`Blocks` are padded already."""
    length = time_buckets.bucket_length(steps)

    def pad(a):
        if isinstance(a, Blocks):
            if a.steps is None:  # a plain loop's kept output
                return Blocks(
                    [time_buckets.pad_steps(b, length) for b in a.blocks],
                    a.axis,
                    steps,
                )
            return a
        return time_buckets.pad_steps(a, length)

    return _map_time_args(args, axes, pad)


def _unpadded_args(args, axes):
    """Padded :class:`Blocks` cut to their true steps, for a loop that is
    not bucketed."""

    def cut(a):
        if isinstance(a, Blocks) and a.steps is not None:
            return Blocks(a.unpadded(), a.axis)
        return a

    return _map_time_args(args, axes, cut)


def run_in_parts(fn, parts, args, axes, out_axes):
    """``fn(*args)`` as ``parts`` calls on row blocks, outputs joined.

    Args:
        fn: returns a flat tuple of tensors; a
            :class:`~keras_rnnlm.loops.time_buckets.BucketedLoop` gets its
            time-major arguments padded to their bucket length and the
            true step count (see :mod:`~keras_rnnlm.loops.time_buckets`),
            and its time-major outputs are cut back to the true steps
            (those kept as :class:`Blocks` stay padded).
        parts: the number of blocks (1: ``fn(*args)`` itself).
        args: the arguments; an argument may be a tuple of tensors, and a
            tensor may be the :class:`Blocks` of an earlier call with the
            same ``parts`` (given to the blocks as they are).
        axes: per argument, the batch axis of its tensors, or ``None`` for
            an argument every block shares (weights). Batch axis 1 means
            a time-major tensor (time on axis 0).
        out_axes: per output, the batch axis the blocks' outputs are
            concatenated on, ``None`` to add them up (a gradient with
            respect to shared weights), or :class:`Keep` to leave them as
            :class:`Blocks`; or a function of the number of outputs
            returning those (for loops whose output count depends on the
            cell).
    """
    bucketed = isinstance(fn, time_buckets.BucketedLoop)
    steps = None
    call = fn
    if bucketed:
        steps = _true_steps(args, axes)
        args = _bucketed_args(args, axes, steps)

        def call(*block):
            return fn(steps, *block)

    else:
        args = _unpadded_args(args, axes)

    batch = None
    for arg, axis in zip(args, axes):
        if axis is not None:
            for a in arg if isinstance(arg, tuple) else (arg,):
                if isinstance(a, Blocks):
                    rows = [b.shape[axis] for b in a.blocks]
                    batch = batch or (None if None in rows else sum(rows))
                else:
                    batch = batch or a.shape[axis]
    if parts == 1 or batch is None or batch < parts:
        # one call on the whole batch
        results = [call(*_map_tensors(args, _joined))]
        if not bucketed:
            return results[0]
    else:
        results = [call(*block) for block in _split(args, axes, parts, batch)]
    if callable(out_axes):
        out_axes = out_axes(len(results[0]))
    import tensorflow as tf  # TensorFlow backend only (loop_parts)

    joined = []
    for i, axis in enumerate(out_axes):
        outs = [r[i] for r in results]
        if isinstance(axis, Keep):
            joined.append(Blocks(outs, axis.axis, steps))
        elif axis is None:
            joined.append(tf.add_n(outs))
        else:
            out = _join(outs, axis)
            joined.append(out[:steps] if bucketed and axis == 1 else out)
    return tuple(joined)


def _joined(a):
    """A kept argument given to one call on the whole batch: its blocks
    joined."""
    return _join(a.blocks, a.axis) if isinstance(a, Blocks) else a


def _map_tensors(args, fn):
    return tuple(
        tuple(fn(v) for v in a) if isinstance(a, tuple) else fn(a) for a in args
    )


def _split(args, axes, parts, batch):
    """Per block, the arguments of its call."""
    import tensorflow as tf  # TensorFlow backend only (loop_parts)

    sizes = _block_sizes(batch, parts)

    def split_one(a, axis):
        if isinstance(a, Blocks):
            if len(a.blocks) != parts:
                raise ValueError(
                    f"{len(a.blocks)} kept blocks given to {parts} parts"
                )
            return a.blocks
        return tf.split(a, sizes, axis=axis)

    def split(arg, axis):
        if axis is None:
            return [arg] * parts
        if isinstance(arg, tuple):
            return list(zip(*(split_one(a, axis) for a in arg)))
        return split_one(arg, axis)

    return list(zip(*(split(a, ax) for a, ax in zip(args, axes))))
