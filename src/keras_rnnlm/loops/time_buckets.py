"""One compiled program per bucket of sequence lengths (TensorFlow).

XLA compiles one program per input *shape*, and the trainers draw the
window length of every batch (variable BPTT: 44-49 distinct lengths an
epoch for the AWD-LSTM paper preset), so a loop compiled for each length
would recompile ~1 s of XLA for every new one. Instead, a compiled loop
(:func:`keras_rnnlm.loops.recurrence.compile_loop`) receives its time-major
sequences padded from ``T`` steps to :func:`bucket_length` ``(T)`` rows and
the true ``T`` as a runtime int32 scalar; the loop inside
(:func:`keras_rnnlm.loops.recurrence.scan`) runs exactly ``T`` steps
(forward ``t = 0 .. T-1``, reverse ``t = T-1 .. 0``), so every number is
the one the unpadded loop computes, and the rows past ``T`` are neither
read nor written (the per-step outputs there are XLA's zero-initialised
buffer). :func:`~keras_rnnlm.loops.loop_parts.run_in_parts`, which makes
every call of a compiled loop, pads the time-major arguments (batch axis 1)
and slices the time-major outputs back to ``T``; the outputs only the next
compiled loop reads (a forward's saved states and gates, kept as
:class:`~keras_rnnlm.loops.loop_parts.Blocks`) stay padded, so the reverse
loop reads them without a copy.

:data:`GRANULARITY`: lengths are rounded up to a multiple of 16 (one
step stays one). Padding costs no arithmetic (the loop stops at ``T``),
only the copy of the padded inputs and at most 15 unused rows of each
per-step output (at ``T = 70``: 10 rows, 14 %); with 16, the lengths
variable BPTT draws (mostly ``N(bptt, 5)``, sometimes ``N(bptt / 2, 5)``)
fall in about five buckets an epoch instead of 44-49 distinct lengths. A
coarser grid would save a program or two and pad more; a finer one would
recompile more. On JAX the whole train step is one ``jit`` program that
retraces per shape anyway, so nothing is padded there.
"""

import contextlib
import contextvars

#: Sequence lengths are rounded up to a multiple of this.
GRANULARITY = 16

_STEPS = contextvars.ContextVar("keras_rnnlm_loop_steps", default=None)


def bucket_length(steps):
    """``steps`` rounded up to a multiple of :data:`GRANULARITY` (an int,
    or a scalar tensor for a dynamic length); one step stays one (a
    token-at-a-time loop, as in generation, has one length anyway, and
    padding would copy 16 rows a token)."""
    rounded = (steps + GRANULARITY - 1) // GRANULARITY * GRANULARITY
    if isinstance(steps, int):
        return steps if steps <= 1 else rounded
    import tensorflow as tf  # TensorFlow backend only

    return tf.where(steps > 1, rounded, steps)


def loop_steps():
    """The true step count of the compiled loop being traced (a scalar
    int32 tensor), or ``None`` outside one."""
    return _STEPS.get()


@contextlib.contextmanager
def _running(steps):
    token = _STEPS.set(steps)
    try:
        yield
    finally:
        _STEPS.reset(token)


def pad_steps(x, length):
    """Time-major ``x`` (``T`` rows on axis 0) padded with zero rows to
    ``length`` rows (unchanged where it has them already)."""
    import tensorflow as tf  # TensorFlow backend only

    if isinstance(length, int) and x.shape[0] == length:
        return x
    paddings = [[0, length - tf.shape(x)[0]]] + [[0, 0]] * (len(x.shape) - 1)
    return tf.pad(x, paddings)


def steps_tensor(steps):
    """``steps`` (an int or a scalar tensor) as the int32 tensor a compiled
    loop takes (a Python int would retrace the loop for every value)."""
    import tensorflow as tf  # TensorFlow backend only

    return tf.cast(steps, tf.int32)


class BucketedLoop:
    """``fn`` XLA-compiled once per bucket of lengths (TensorFlow).

    ``loop(steps, *args)`` runs ``fn(*args)`` with its time-major
    arguments padded to a bucket length (by the caller:
    :func:`~keras_rnnlm.loops.loop_parts.run_in_parts`) and every
    :func:`~keras_rnnlm.loops.recurrence.scan` inside running the true
    ``steps``; its time-major outputs keep the padded length.
    """

    def __init__(self, fn):
        import tensorflow as tf  # TensorFlow backend only

        def run(steps, *args):
            with _running(steps):
                return fn(*args)

        self.compiled = tf.function(run, jit_compile=True, autograph=False)

    def __call__(self, steps, *args):
        return self.compiled(steps_tensor(steps), *args)
