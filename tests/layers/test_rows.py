import keras
import numpy as np
import pytest
from graphs_ran import training_step_nodes
from keras import ops
from layer_testing import gradients
from layer_testing import run_layer_test

from keras_rnnlm.layers.rows import Dense
from keras_rnnlm.layers.rows import Embedding
from keras_rnnlm.layers.rows import over_rows
from keras_rnnlm.layers.rows import project_rows

TF_ONLY = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="TensorFlow's kernels and graph optimizer",
)

#: Constructor arguments of Keras's ``Embedding`` and ``Dense`` (which these
#: layers keep as they are) that Keras's ``get_config`` leaves out: initial
#: weights, and LoRA's rank and scale, saved only once LoRA is enabled.
KERAS_LEAVES_OUT = ("weights", "lora_rank", "lora_alpha")


def _squares(out):
    return ops.sum(out**2)


def _twins(ours, theirs, x):
    """``ours`` and the Keras layer ``theirs`` built on ``x``, with
    ``ours``'s weights."""
    ours(x)
    theirs(x)
    theirs.set_weights(ours.get_weights())
    return ours, theirs


def test_over_rows_keeps_the_leading_axes():
    x = np.arange(24, dtype="float32").reshape(2, 3, 4)
    w = np.ones((4, 5), "float32")
    out = ops.convert_to_numpy(over_rows(x, lambda r: ops.matmul(r, w)))
    np.testing.assert_allclose(out, x @ w)
    flat = ops.convert_to_numpy(over_rows(x[0], lambda r: ops.matmul(r, w)))
    np.testing.assert_allclose(flat, x[0] @ w)


@pytest.mark.parametrize("bias", [True, False])
def test_project_rows_is_the_affine_map(bias):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 3, 4)).astype("float32")
    w = rng.normal(size=(4, 5)).astype("float32")
    b = rng.normal(size=(5,)).astype("float32") if bias else None
    out = ops.convert_to_numpy(project_rows(x, w, b))
    np.testing.assert_allclose(out, x @ w + (0 if b is None else b), 1e-5)


@TF_ONLY
def test_mixture_heads_latent_projection_is_one_fused_product():
    """The MoS head's ``tanh(x @ W + b)`` as TensorFlow ran it in a
    training step: the bias inside the product, no separate pass over
    the (tokens, K x d) latents."""
    nodes = training_step_nodes(
        head="mos", mixture_components=2, hidden_sizes=[4]
    )
    forward = {
        n.op for n in nodes if "/mos" in n.name and "gradient" not in n.name
    }
    assert any("FusedMatMul" in op for op in forward), forward
    assert not {"BiasAdd", "AddV2", "Add"} & forward, forward


@pytest.mark.parametrize("shape", [(2, 3, 4), (6, 4)])
def test_dense_is_keras_dense(shape):
    """Same outputs and gradients as ``keras.layers.Dense``."""
    x = np.random.default_rng(0).normal(size=shape).astype("float32")
    ours, theirs = _twins(
        Dense(7, bias_initializer="uniform"),
        keras.layers.Dense(7),
        x,
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(ours(x)),
        ops.convert_to_numpy(theirs(x)),
        rtol=1e-5,
        atol=1e-6,
    )
    for a, b in zip(
        gradients(ours, x, loss=_squares), gradients(theirs, x, loss=_squares)
    ):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_embedding_is_keras_embedding():
    """Same rows and gradients as ``keras.layers.Embedding``, also after an
    SGD step updated some rows in place."""
    ids = np.array([[1, 2, 3], [12, 0, 3]], "int32")
    ours, theirs = _twins(Embedding(13, 4), keras.layers.Embedding(13, 4), ids)
    for layer in (ours, theirs):
        model = keras.Sequential([keras.Input((3,), dtype="int32"), layer])
        model.compile(keras.optimizers.SGD(0.5), "mse")
        model.train_on_batch(ids, np.ones((2, 3, 4), "float32"))
    np.testing.assert_array_equal(
        ours.get_weights()[0], theirs.get_weights()[0]
    )
    np.testing.assert_array_equal(
        ops.convert_to_numpy(ours(ids)), ops.convert_to_numpy(theirs(ids))
    )


def test_weights_files_are_interchangeable_with_keras_layers(tmp_path):
    """A weights file of a model with Keras's ``Embedding`` and ``Dense``
    (what runs saved before these layers) loads into the same model made
    of these layers, and back: a weights file names a layer's variables
    after its class."""

    def model(embedding, dense):
        ids = keras.Input((3,), dtype="int32")
        x = embedding(13, 4, name="embedding")(ids)
        return keras.Model(ids, dense(7, name="decoder")(x))

    theirs = model(keras.layers.Embedding, keras.layers.Dense)
    ours = model(Embedding, Dense)
    rng = np.random.default_rng(0)
    for source, target in ((theirs, ours), (ours, theirs)):
        source.set_weights(
            [rng.normal(size=w.shape) for w in source.get_weights()]
        )
        path = str(tmp_path / f"{source.layers[1].__module__}.weights.h5")
        source.save_weights(path)
        target.load_weights(path)
        for a, b in zip(source.get_weights(), target.get_weights()):
            np.testing.assert_array_equal(a, b)


def test_embedding_keeps_the_compute_dtype():
    emb = Embedding(13, 4, dtype="mixed_bfloat16")
    out = emb(np.array([[1, 2]], "int32"))
    assert ops.dtype(out) == "bfloat16"
    assert emb.embeddings.dtype == "float32"


def test_layer_checks_embedding():
    run_layer_test(
        Embedding,
        dict(input_dim=13, output_dim=4),
        np.array([[1, 2, 3], [12, 0, 5]], "int32"),
        expected_output_shape=(None, 3, 4),
        expected_num_trainable_weights=1,
        config_exclude=KERAS_LEAVES_OUT,
    )


def test_layer_checks_dense():
    run_layer_test(
        Dense,
        dict(units=5),
        input_shape=(2, 3, 4),
        expected_output_shape=(None, 3, 5),
        expected_num_trainable_weights=2,
        config_exclude=KERAS_LEAVES_OUT,
    )


@TF_ONLY
def test_training_step_reads_rows_and_fuses_the_bias():
    """In a training step of a model with its own output matrix, as
    TensorFlow ran it (after its graph optimizations): the embedding's
    rows are gathered from the variable (no read, hence no copy, of the
    whole table), and the decoder's bias is added inside its matrix
    product (no separate pass over the tokens x vocabulary logits)."""
    nodes = training_step_nodes()

    def ops_of(layer):
        return {n.op for n in nodes if f"/{layer}" in n.name}

    embedding, decoder = ops_of("embedding"), ops_of("decoder")
    assert "ResourceGather" in embedding, embedding
    assert "GatherV2" not in embedding, embedding
    assert any("FusedMatMul" in op for op in decoder), decoder
    assert not {"BiasAdd", "AddV2", "Add"} & decoder, decoder


@TF_ONLY
def test_the_context_tables_rows_are_gathered_too():
    """The CBOW context module's own (trainable) table is read as rows
    in a training step, like the embedding's."""
    nodes = training_step_nodes(context={"type": "cbow", "dim": 3})
    reads = {n.op for n in nodes if "/cbow_context" in n.name}
    assert "ResourceGather" in reads, reads
    assert "GatherV2" not in reads, reads
