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


@tf_only
def test_decay_and_step_are_one_xla_program_in_a_training_step():
    """With weight decay, a training step as TensorFlow ran it updates the
    weights in one XLA-compiled call of the optimizer (each weight read
    and written once), not Keras's decay passes then a kernel a weight;
    the embedding's sparse rows are still subtracted by a scatter."""
    from graphs_ran import training_step_nodes

    nodes = training_step_nodes(weight_decay=1e-3)
    ops = {n.op for n in nodes}
    assert not {"ResourceApplyGradientDescent", "AssignSubVariableOp"} & ops
    assert "ResourceScatterSub" in ops, ops
    programs = [
        n
        for n in nodes
        if n.op == "StatefulPartitionedCall"
        and n.name.startswith("sgd")
        and n.attr["_XlaMustCompile"].b
    ]
    assert len(programs) == 1, [(n.op, n.name) for n in nodes]
    plain = {n.op for n in training_step_nodes()}
    assert "ResourceApplyGradientDescent" in plain, plain


@tf_only
@pytest.mark.parametrize("graph", [True, False])
def test_excluded_weights_are_stepped_but_not_decayed(graph):
    import tensorflow as tf

    emb, w, grads = _embedding_case()
    before = [v.numpy().astype("float64") for v in (emb, w)]
    dense = [tf.convert_to_tensor(g).numpy().astype("float64") for g in grads]
    opt = SGD(learning_rate=0.5, weight_decay=0.01)
    opt.exclude_from_weight_decay(var_list=[w])
    opt.build([emb, w])

    def step():
        opt.apply(grads, [emb, w])

    (tf.function(step) if graph else step)()
    for v, b, g, wd in zip((emb, w), before, dense, (0.01, 0.0)):
        want = b - 0.5 * wd * b - 0.5 * g
        np.testing.assert_allclose(v.numpy(), want, rtol=1e-5, atol=1e-6)


@tf_only
def test_decayed_steps_equal_keras_sgd():
    """Several steps of dense gradients with decay and a learning rate
    that changes between them: the package's SGD and Keras's agree to
    float32 round-off."""
    import tensorflow as tf

    rng = np.random.default_rng(1)
    init = [rng.normal(size=s).astype("float32") for s in ((5, 4), (4,))]
    ours = [tf.Variable(x) for x in init]
    keras_vars = [tf.Variable(x) for x in init]
    opts = [
        SGD(learning_rate=0.7, weight_decay=0.05),
        keras.optimizers.SGD(learning_rate=0.7, weight_decay=0.05),
    ]
    steps = []
    for opt, variables in zip(opts, (ours, keras_vars)):
        opt.build(variables)
        steps.append(tf.function(lambda g, o=opt, v=variables: o.apply(g, v)))
    for i in range(4):
        grads = [
            tf.constant(rng.normal(size=x.shape), tf.float32) for x in init
        ]
        for step in steps:
            step(grads)
        for opt in opts:
            opt.learning_rate = 0.7 / (i + 2)
    for a, b in zip(ours, keras_vars):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=2e-6, atol=1e-7)
