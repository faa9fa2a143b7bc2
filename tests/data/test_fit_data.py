"""What ``model.fit`` reads (fit_data): a stream's epoch as a tf.data
pipeline without background threads; the trainer's use of it:
tests/training/test_trainer.py."""

import keras
import numpy as np
import pytest

from keras_rnnlm.data.fit_data import fit_data
from keras_rnnlm.data.sentences import SentenceResetSequence
from keras_rnnlm.data.streams import LMSequence

tf_only = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="tf.data"
)


def _ids(n, seed=0):
    return np.random.default_rng(seed).integers(1, 50, n).astype("int32")


def _streams():
    ids = _ids(203)
    starts = np.zeros(203, bool)
    starts[::17] = True
    resumed = LMSequence(ids, 4, 5)
    resumed.set_epoch(0, 3)
    return {
        "fixed": LMSequence(ids, 4, 5),
        "padded": LMSequence(ids, 3, 7, pad_to=7),
        "variable": LMSequence(ids, 2, 8, variable=True, seed=3),
        "sentences": SentenceResetSequence(ids, 4, 5, starts),
        "sampled": LMSequence(ids, 4, 5, targets_as_input=True),
        "resumed": resumed,
    }


@tf_only
@pytest.mark.parametrize("name", list(_streams()))
def test_the_dataset_serves_the_streams_batches(name):
    """Element by element the stream's own batches, in order, as many as
    the epoch has (the cardinality Keras reads)."""
    import tensorflow as tf

    stream = _streams()[name]
    data = fit_data(stream)
    assert int(data.cardinality()) == len(stream)
    served = list(data.as_numpy_iterator())
    assert len(served) == len(stream)
    for i, batch in enumerate(served):
        want = stream[i]
        tf.nest.assert_same_structure(batch, want)
        for got, expected in zip(tf.nest.flatten(batch), tf.nest.flatten(want)):
            np.testing.assert_array_equal(got, expected)
            assert got.dtype == expected.dtype


@tf_only
def test_no_background_threads_and_a_free_time_axis():
    """Autotuning and prefetch injection off (with either on, training at
    two threads ran half its passes at half speed: the module doc); the
    batch axis static (the fused loops split rows by it), the time axis
    free (variable windows: one trace)."""
    data = fit_data(LMSequence(_ids(100), 4, 5))
    options = data.options()
    assert options.autotune.enabled is False
    assert options.experimental_optimization.inject_prefetch is False
    x, y, w = data.element_spec
    for spec in (x, y, w):
        assert spec.shape.as_list() == [4, None]


def test_other_backends_read_the_stream_itself():
    stream = LMSequence(_ids(100), 4, 5)
    if keras.backend.backend() == "tensorflow":
        pytest.skip("the TensorFlow pipeline is tested above")
    assert fit_data(stream) is stream
