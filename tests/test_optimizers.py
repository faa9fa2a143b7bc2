"""The package's SGD (keras_rnnlm.optimizers): the dense gradient's norm
for global-norm clipping, and the fused update, against NumPy."""

import keras
import numpy as np
import pytest

from keras_rnnlm.optimizers import SGD
from keras_rnnlm.optimizers import global_norm

tf_only = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="tf.IndexedSlices"
)


def _embedding_case(seed=0):
    """An embedding used by repeated tokens, and a dense weight: the
    embedding's gradient is a tf.IndexedSlices with repeated rows."""
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    emb = tf.Variable(rng.normal(size=(7, 3)).astype("float32"))
    w = tf.Variable(rng.normal(size=(3, 2)).astype("float32"))
    ids = tf.constant([1, 1, 1, 4, 4, 6])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.tanh(tf.gather(emb, ids) @ w) ** 2)
    grads = tape.gradient(loss, [emb, w])
    assert isinstance(grads[0], tf.IndexedSlices)
    return emb, w, grads


@tf_only
def test_the_norm_is_the_dense_gradients():
    """A token seen three times adds the square of its rows' sum (as
    PyTorch's clip_grad_norm_ on the dense gradient), not the sum of their
    squares (Keras's global_norm on IndexedSlices)."""
    import tensorflow as tf
    from keras.src.optimizers.base_optimizer import global_norm as keras_norm

    _, _, grads = _embedding_case()
    dense = np.concatenate(
        [np.ravel(tf.convert_to_tensor(g).numpy()) for g in grads]
    )
    want = np.sqrt(np.sum(dense.astype("float64") ** 2))
    np.testing.assert_allclose(float(global_norm(grads)), want, rtol=1e-6)
    assert abs(float(keras_norm(grads)) - want) > 1e-4 * want


@tf_only
@pytest.mark.parametrize("graph", [True, False])
@pytest.mark.parametrize("clipnorm", [None, 0.1, 100.0])
@pytest.mark.parametrize("weight_decay", [None, 0.01])
def test_a_step_is_clipped_sgd_with_coupled_decay(
    graph, clipnorm, weight_decay
):
    """One step, inside a tf.function (the fused kernels) or eagerly:
    ``w - lr * wd * w - lr * min(1, c / |g|) * g`` with the dense
    gradient, in float64 by hand."""
    import tensorflow as tf

    emb, w, grads = _embedding_case()
    before = [v.numpy().astype("float64") for v in (emb, w)]
    dense = [tf.convert_to_tensor(g).numpy().astype("float64") for g in grads]
    opt = SGD(
        learning_rate=0.5, global_clipnorm=clipnorm, weight_decay=weight_decay
    )
    opt.build([emb, w])

    def step():
        opt.apply(grads, [emb, w])

    (tf.function(step) if graph else step)()
    norm = np.sqrt(sum(np.sum(g**2) for g in dense))
    scale = min(1.0, clipnorm / norm) if clipnorm else 1.0
    for v, b, g in zip((emb, w), before, dense):
        want = b - 0.5 * (weight_decay or 0.0) * b - 0.5 * scale * g
        np.testing.assert_allclose(v.numpy(), want, rtol=1e-5, atol=1e-6)
    assert int(opt.iterations.numpy()) == 1


@tf_only
def test_momentum_takes_keras_path_with_the_dense_norm():
    import tensorflow as tf

    emb, w, grads = _embedding_case()
    before = [v.numpy().astype("float64") for v in (emb, w)]
    dense = [tf.convert_to_tensor(g).numpy().astype("float64") for g in grads]
    opt = SGD(learning_rate=0.5, momentum=0.9, global_clipnorm=0.1)
    opt.apply(grads, [emb, w])
    scale = min(1.0, 0.1 / np.sqrt(sum(np.sum(g**2) for g in dense)))
    for v, b, g in zip((emb, w), before, dense):
        np.testing.assert_allclose(v.numpy(), b - 0.5 * scale * g, rtol=1e-5)


def test_a_non_finite_norm_gives_nan_steps():
    """Keras's rule: an infinite or NaN norm makes the scale NaN (the
    trainer's NaN guard then stops the run)."""
    v = keras.Variable(np.ones((2, 2), "float32"))
    opt = SGD(learning_rate=0.1, global_clipnorm=1.0)
    opt.apply([keras.ops.convert_to_tensor(np.full((2, 2), np.inf))], [v])
    assert np.all(np.isnan(keras.ops.convert_to_numpy(v.value)))


def test_config_round_trip_and_registered():
    opt = SGD(learning_rate=0.3, global_clipnorm=0.25, weight_decay=1.2e-6)
    config = keras.optimizers.serialize(opt)
    assert config["registered_name"] == "keras_rnnlm>SGD"
    back = keras.optimizers.deserialize(config)
    assert type(back) is SGD
    assert back.get_config() == opt.get_config()
    # Keras's own name (sgd, sgd_1, ...): the same variable paths
    assert opt.name.split("_")[0] == "sgd"
    assert [v.path.split("/")[-1] for v in opt.variables] == [
        v.path.split("/")[-1] for v in keras.optimizers.SGD().variables
    ]
