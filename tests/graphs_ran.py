"""The graph nodes TensorFlow ran (after its graph optimizations) in one
training step of a tiny language model (:func:`training_step_nodes`) or
one forward pass (:func:`forward_nodes`).

Tests that check which kernels a step runs (one NLL forward for the loss
and its metric, the embedding's row reads, the decoder's fused bias)
import it as ``from graphs_ran import training_step_nodes`` (``tests/``
is on ``sys.path``).
"""

import itertools
import re

import numpy as np

_STEPS = itertools.count()


def training_step_nodes(weight_decay=0.0, **model):
    """The nodes of every partition graph of one ``train_step`` of a
    one-layer LSTM of 4 units, vocabulary 50, its own output matrix
    (``model``: other ``ModelConfig`` fields), compiled as the trainer
    compiles (SGD, clipping, ``weight_decay``), on a batch of 2 x 3
    tokens (TensorFlow backend)."""
    from keras_rnnlm.config import TrainConfig
    from keras_rnnlm.training import compile_model

    model, (x, y) = _tiny_model(**model)
    compile_model(
        model,
        TrainConfig(learning_rate=1.0, clipnorm=5.0, weight_decay=weight_decay),
    )
    return _nodes_ran(lambda: model.train_step((x, y)), model.name)


def forward_nodes(**model):
    """The nodes TensorFlow ran for one forward pass (``training=False``,
    as an evaluation runs it) of the model of :func:`training_step_nodes`
    on the same batch."""
    model, (x, _) = _tiny_model(**model)
    return _nodes_ran(lambda: model(x, training=False), model.name)


def _tiny_model(**model):
    import tensorflow as tf

    from keras_rnnlm.config import ModelConfig
    from keras_rnnlm.models import build_language_model

    rng = np.random.default_rng(0)
    x = tf.constant(rng.integers(0, 50, (2, 3)), tf.int32)
    y = tf.constant(rng.integers(0, 50, (2, 3)), tf.int32)
    config = ModelConfig(
        **{"embedding_dim": 4, "hidden_sizes": [4], "cell": "lstm", **model}
    )
    name = f"graphs_ran_{next(_STEPS)}"
    return build_language_model(config, 50, 2, seed=0, name=name), (x, y)


def _nodes_ran(fn, name):
    """The nodes of the partition graphs TensorFlow ran for ``fn`` (as a
    ``tf.function``) under the model named ``name``."""
    import tensorflow as tf
    from tensorflow.python.eager import context

    step = tf.function(fn)
    # The partition graphs come with the first call (which instantiates
    # the function), so the metadata is on before it.
    context.enable_run_metadata()
    try:
        step()
        ran = context.export_run_metadata()
    finally:
        context.disable_run_metadata()
    # Only the graphs of this step: the metadata may also hold graphs of
    # functions an earlier test in this process ran.
    ours = re.compile(rf"{name}(_\d+)?/")
    graphs = [
        [
            node
            for partition in graph.partition_graphs
            for node in partition.node
        ]
        for graph in ran.function_graphs
    ]
    return [
        node
        for nodes in graphs
        if any(ours.match(node.name) for node in nodes)
        for node in nodes
    ]
