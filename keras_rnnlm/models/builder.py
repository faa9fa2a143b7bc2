"""The one model builder: embedding -> recurrent stack -> output head.

The same :class:`~keras_rnnlm.config.ModelConfig` builds the training model
(stateful, fixed batch size), evaluation models with other batch sizes (the
weights are copied with :func:`copy_weights`) and, later, the stateless
inference graph for export.
"""

import keras

from keras_rnnlm.config import ConfigError
from keras_rnnlm.layers.one_hot import OneHot
from keras_rnnlm.layers.tied_embedding import TiedEmbedding
from keras_rnnlm.models.recurrent_registry import make_recurrent_layer

HEADS = ("softmax", "tied")
INPUT_ENCODINGS = ("embedding", "one_hot")


def _initializer(init_range, seed, offset):
    if init_range is None:
        return None
    return keras.initializers.RandomUniform(
        -init_range, init_range, seed=None if seed is None else seed + offset
    )


def validate_model_config(config):
    """Raises ConfigError for inconsistent model settings."""
    if config.head not in HEADS:
        raise ConfigError(
            f"model.head must be one of {HEADS}, got {config.head!r}"
        )
    if config.input_encoding not in INPUT_ENCODINGS:
        raise ConfigError(
            f"model.input_encoding must be one of {INPUT_ENCODINGS}, got "
            f"{config.input_encoding!r}"
        )
    if config.input_encoding == "one_hot" and config.head == "tied":
        raise ConfigError(
            "A one-hot input has no embedding matrix to tie: use "
            "model.head='softmax' with model.input_encoding='one_hot'"
        )
    if not config.hidden_sizes:
        raise ConfigError("model.hidden_sizes needs at least one layer")
    if config.head == "tied" and config.hidden_sizes[-1] != (
        config.embedding_dim
    ):
        raise ConfigError(
            "A tied output layer needs the last recurrent layer's size "
            f"({config.hidden_sizes[-1]}) to equal model.embedding_dim "
            f"({config.embedding_dim})"
        )
    if not 0.0 <= config.dropout < 1.0:
        raise ConfigError(f"model.dropout must be in [0, 1): {config.dropout}")


def build_language_model(
    config, vocab_size, batch_size, stateful=True, seed=None, name="rnnlm"
):
    """Builds the language model described by ``config``.

    Args:
        config: a :class:`~keras_rnnlm.config.ModelConfig`.
        vocab_size: number of token types.
        batch_size: fixed batch size (required when ``stateful``).
        stateful: carry recurrent state across calls (training/evaluation
            on a stream); reset it with :func:`reset_states`.
        seed: seed of the weight initializers and dropout layers.
        name: model name.

    Returns:
        A functional ``keras.Model`` mapping int32 tokens (batch, time) to
        float32 logits (batch, time, vocab).
    """
    validate_model_config(config)
    tokens = keras.Input(
        batch_shape=(batch_size if stateful else None, None),
        dtype="int32",
        name="tokens",
    )
    init = _initializer(config.init_range, seed, 0)
    emb_kwargs = {"embeddings_initializer": init} if init else {}
    if config.input_encoding == "one_hot":
        embedding = OneHot(vocab_size, name="one_hot")
    elif config.head == "tied":
        embedding = TiedEmbedding(
            vocab_size, config.embedding_dim, name="embedding", **emb_kwargs
        )
    else:
        embedding = keras.layers.Embedding(
            vocab_size, config.embedding_dim, name="embedding", **emb_kwargs
        )
    x = embedding(tokens)

    def dropout(x, i):
        if not config.dropout:
            return x
        return keras.layers.Dropout(
            config.dropout,
            seed=None if seed is None else seed + 100 + i,
            name=f"dropout_{i}",
        )(x)

    x = dropout(x, 0)
    for i, units in enumerate(config.hidden_sizes):
        layer = make_recurrent_layer(
            config.cell,
            units,
            stateful=stateful,
            initializer=_initializer(config.init_range, seed, i + 1),
            name=f"rnn_{i}",
            **config.cell_kwargs,
        )
        x = dropout(layer(x), i + 1)
    if config.head == "tied":
        logits = embedding(x, reverse=True)
    else:
        init = _initializer(config.init_range, seed, 99)
        head_kwargs = (
            {"kernel_initializer": init, "bias_initializer": init}
            if init
            else {}
        )
        logits = keras.layers.Dense(vocab_size, name="decoder", **head_kwargs)(
            x
        )
    logits = keras.layers.Activation("linear", dtype="float32", name="logits")(
        logits
    )
    return keras.Model(tokens, logits, name=name)


def recurrent_layers(model):
    """The model's recurrent layers (anything with ``reset_state``)."""
    return [
        layer
        for layer in model._flatten_layers(include_self=False)
        if hasattr(layer, "reset_state") and getattr(layer, "stateful", 0)
    ]


def reset_states(model):
    """Zeroes every carried recurrent state of ``model``."""
    for layer in recurrent_layers(model):
        layer.reset_state()


def copy_weights(source, target):
    """Copies trainable weights between two models built from one config.

    The models may differ in batch size (their state variables are not
    copied). Raises ValueError if the structures differ.
    """
    src, dst = source.trainable_variables, target.trainable_variables
    if len(src) != len(dst):
        raise ValueError(
            f"Models differ: {len(src)} vs {len(dst)} trainable variables"
        )
    for s, d in zip(src, dst):
        if tuple(s.shape) != tuple(d.shape):
            raise ValueError(
                f"Weight shape mismatch: {s.path} {s.shape} vs "
                f"{d.path} {d.shape}"
            )
        d.assign(s.value)
