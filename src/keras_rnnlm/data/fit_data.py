"""What ``model.fit`` reads: a training stream's epoch as a ``tf.data``
pipeline that runs in the step's own call.

Why: handed a :class:`~keras_rnnlm.data.streams.LMSequence` (a
``keras.utils.PyDataset``), or numpy arrays, Keras on TensorFlow reads the
batches through a ``tf.data`` pipeline with autotuning on and a prefetch
buffer, whose background threads hand every batch over to the step. On a
small machine with both cores busy computing, the hand-over waits for a
core, and a whole ``fit`` pass runs at half speed. Measured on the
Zaremba small LSTM (2 x 200, batch 20 x 20), 2-core machine, two threads,
40 batches a pass, three processes of six passes of each feed
(the ``fit_feed`` probe, ``bench/fit_feed.py`` at commit 1f4ac49, with
``--processes 3 --passes 6 --threads 2``; ``bench/results/fit_feed.jsonl``):
the stream handed to ``fit`` as it is, 6 of 18 passes at half speed (a
constant 6.2k tok/s); numpy arrays, 5 of 18; :func:`fit_data`, 0 of 18.
Both autotuning and prefetch injection are turned off.

The pipeline is a generator over the stream's current epoch (the batches
are :class:`LMSequence`'s own, element by element), so every stream the
trainer makes is served: fixed or variable windows, sentence-reset masks,
the targets of a sampled softmax, a resumed epoch's remaining windows.
Call it once per epoch (after :meth:`LMSequence.set_epoch`): it fixes
the epoch's length when it is called, as Keras fixes an epoch's number of
batches when ``fit`` starts. Every tensor's time axis is declared ``None``
(Keras would infer a fixed one from the first two batches, and variable
windows change it from batch to batch): one traced train step for every
length. (The XLA-compiled recurrence still compiles once per distinct
length; that number is bounded by ``data.bptt_max_delta`` /
``data.bptt_multiple``.)
"""

import numpy as np
from keras import backend

from keras_rnnlm.data.streams import process_rows


def fit_data(stream):
    """``stream``'s current epoch as ``model.fit`` should read it: on
    TensorFlow a ``tf.data.Dataset`` of ``stream``'s batches with no
    background threads (see the module doc), of known length; on other
    backends ``stream`` itself."""
    if backend.backend() != "tensorflow":
        return stream
    import tensorflow as tf  # TensorFlow backend only (returned above)

    first, last = process_rows(stream.batch_size)
    rows = last - first

    def batches():
        for i in range(len(stream)):
            yield stream[i]

    def spec(array):
        return tf.TensorSpec((rows, None), tf.as_dtype(np.asarray(array).dtype))

    # The structure of the stream's batches (token ids alone, or a dict
    # with the stream's extra inputs, e.g. a sentence-reset mask, and the
    # targets of a sampled softmax), every tensor with a free time axis.
    ids = np.zeros((rows, 1), np.int32)
    extra = {
        **stream.extra_inputs(0),
        **({"targets": ids} if stream.targets_as_input else {}),
    }
    x = {"tokens": ids, **extra} if extra else ids
    signature = tf.nest.map_structure(
        spec, (x, ids, np.zeros((rows, 1), np.float32))
    )
    data = tf.data.Dataset.from_generator(batches, output_signature=signature)
    options = tf.data.Options()
    options.autotune.enabled = False
    options.experimental_optimization.inject_prefetch = False
    # A known cardinality: otherwise Keras runs one more step than there
    # are batches (to find the end), and per-batch callbacks see an index
    # past the epoch's last window.
    return data.with_options(options).apply(
        tf.data.experimental.assert_cardinality(len(stream))
    )
