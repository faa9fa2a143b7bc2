"""An evaluation stream's windows as a ``tf.data`` pipeline of graph ops.

:class:`~keras_rnnlm.data.streams.LMSequence` is a ``keras.utils.PyDataset``:
on TensorFlow, Keras reads it through a Python generator on a worker
thread, one window at a time. On a small machine that thread competes
with the compiled step for the cores, and each window pays for the
hand-over. For a plain evaluation stream (fixed windows, padded to one
width, no extra inputs) the windows are slices of the stream array, which
``tf.data`` can cut itself: :func:`graph_windows` gives the same batches
with no Python per window. Measured through the ``Evaluator``'s model on
the AWD-LSTM ``cpu`` shape, 2-core machine, tok/s (``PyDataset`` / these
windows; two processes each): one thread, batch 1 6,394 / 7,099 and
6,300 / 6,910, batch 10 16,551 / 17,141 and 16,244 / 17,141; at two
threads the medians of five to seven processes are within the two-thread
timings' process-to-process spread (batch 1 8,196 / 8,269, batch 10
18,582 / 18,304).
"""

import numpy as np
from keras import backend

from keras_rnnlm.data.streams import LMSequence
from keras_rnnlm.data.streams import process_rows

#: Windows cut ahead of the step (0: each when the step asks for it; a
#: background prefetch measured no faster, with the cores busy computing).
PREFETCH = 0


def supports(stream):
    """Whether :func:`graph_windows` can serve ``stream``: TensorFlow, a
    plain :class:`LMSequence` (no extra inputs) of fixed windows padded to
    one width, with every row in this process."""
    return (
        backend.backend() == "tensorflow"
        and type(stream) is LMSequence
        and not stream.variable
        and stream.pad_to is not None
        and not stream.targets_as_input
        and process_rows(stream.batch_size) == (0, stream.batch_size)
    )


def graph_windows(stream):
    """``stream``'s batches ``(x, y, sample_weight)``, in order, as a
    ``tf.data.Dataset`` (see :func:`supports`), or ``stream`` itself where
    it cannot be."""
    if not supports(stream):
        return stream
    import tensorflow as tf  # TensorFlow backend only (supports)

    windows = stream.windows
    starts = np.array([w.start for w in windows], np.int64)
    lengths = np.array([w.length for w in windows], np.int64)
    width = stream.pad_to
    # The stream plus `width` zeros: every window is then one fixed-width
    # slice, and the zeros are the padding LMSequence adds.
    data = np.pad(stream.streams, ((0, 0), (0, width + 1)))
    data = tf.constant(data)
    positions = tf.range(width, dtype=tf.int64)

    rows = stream.batch_size

    def window(start, length):
        zero = tf.zeros((), tf.int64)
        x = tf.slice(data, tf.stack([zero, start]), [rows, width])
        y = tf.slice(data, tf.stack([zero, start + 1]), [rows, width])
        real = positions < length
        weights = tf.cast(tf.broadcast_to(real, tf.shape(x)), tf.float32)
        zeros = tf.zeros_like(x)
        return (
            tf.where(real, x, zeros),
            tf.where(real, y, zeros),
            weights,
        )

    dataset = tf.data.Dataset.from_tensor_slices((starts, lengths)).map(window)
    return dataset.prefetch(PREFETCH) if PREFETCH else dataset
