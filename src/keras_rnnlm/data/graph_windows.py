"""An evaluation stream's windows cut inside the compiled step.

:class:`~keras_rnnlm.data.streams.LMSequence` is a ``keras.utils.PyDataset``
that ``model.evaluate`` reads one window at a time: on TensorFlow through a
Python generator, or through a ``tf.data`` iterator, whose ``GetNext``
hands each window over between threads. On a small machine with both cores
busy computing, that hand-over waits for a core. Measured on the AWD-LSTM
``cpu`` shape, 2-core machine, two threads, 32 windows a compiled call:
the ``tf.data`` iterator's passes ran either at about 11.7k tok/s or at
8.8k (a pass's mode drawn at random; the slow one is a constant 4 ms a
window), against 12.2k every time for the same compiled step fed windows
sliced from a tensor.

For a plain evaluation stream (fixed windows, padded to one width, no
extra inputs) the windows are slices of the stream array, so the
:class:`~keras_rnnlm.evaluation.static.Evaluator` hands the compiled step a
*chunk* of the array (:func:`window_chunks`), and the step cuts each
window from it (:func:`cut_window`): no iterator, no Python per window.
The batches are :class:`LMSequence`'s own, element by element.
"""

import numpy as np
from keras import backend

from keras_rnnlm.data.streams import LMSequence
from keras_rnnlm.data.streams import process_rows


def supports(stream):
    """Whether the windows of ``stream`` can be cut in the step:
    TensorFlow, a plain :class:`LMSequence` (no extra inputs) of fixed
    windows padded to one width, with every row in this process."""
    return (
        backend.backend() == "tensorflow"
        and type(stream) is LMSequence
        and not stream.variable
        and stream.pad_to is not None
        and not stream.targets_as_input
        and process_rows(stream.batch_size) == (0, stream.batch_size)
        and len(stream) > 0
    )


def window_chunks(stream, windows):
    """``stream``'s windows, ``windows`` at a time (see :func:`supports`).

    Yields ``(slab, offsets, lengths, count)`` numpy arrays, all chunks of
    one shape (one trace of the step): ``slab`` (rows, W) int32, the
    stream columns the chunk reads, zero-padded; ``offsets`` and
    ``lengths`` (``windows``,) int32, where each window starts in the slab
    and how many (input, target) pairs it has (0 past ``count``);
    ``count`` the chunk's windows (fewer in the last chunk). The shapes
    depend on ``windows``, the rows and the widths only.
    """
    width = stream.pad_to
    starts = np.array([w.start for w in stream.windows], np.int64)
    lengths = np.array([w.length for w in stream.windows], np.int64)
    groups = [
        slice(i, min(i + windows, len(starts)))
        for i in range(0, len(starts), windows)
    ]
    # Fixed windows start `bptt` apart: every slab spans the same columns
    # whatever the split's length (one trace and compilation of the step
    # for every split).
    span = (windows - 1) * stream.bptt + width + 1
    # The stream plus zeros: a slab never runs off the end, and the zeros
    # are the padding LMSequence adds.
    data = np.pad(stream.streams, ((0, 0), (0, span))).astype(np.int32)
    for g in groups:
        count = g.stop - g.start
        first = int(starts[g.start])
        offsets = np.zeros(windows, np.int32)
        lens = np.zeros(windows, np.int32)
        offsets[:count] = starts[g] - first
        lens[:count] = lengths[g]
        yield data[:, first : first + span], offsets, lens, np.int32(count)


def cut_window(slab, offset, length, width):
    """``(x, y, sample_weight)`` of the window at ``offset`` in ``slab``
    with ``length`` pairs, padded to ``width`` columns (tf ops: inside the
    compiled step; TensorFlow only)."""
    import tensorflow as tf  # TensorFlow backend only (supports)

    # Gathered columns, not tf.slice: XLA takes a slice's start as a
    # compile-time constant and compiled the step anew for every chunk's
    # offsets (0.4 s each, measured).
    columns = offset + tf.range(width, dtype=offset.dtype)
    x = tf.gather(slab, columns, axis=1)
    y = tf.gather(slab, columns + 1, axis=1)
    real = tf.range(width, dtype=length.dtype) < length
    weights = tf.cast(tf.broadcast_to(real, tf.shape(x)), tf.float32)
    zeros = tf.zeros_like(x)
    return tf.where(real, x, zeros), tf.where(real, y, zeros), weights
