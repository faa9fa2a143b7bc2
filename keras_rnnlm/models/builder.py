"""The one model builder: embedding -> recurrent stack -> output head.

The same :class:`~keras_rnnlm.config.ModelConfig` builds the training model
(stateful, fixed batch size), evaluation models with other batch sizes (the
weights are copied with :func:`copy_weights`) and, later, the stateless
inference graph for export.
"""

import math

import keras

from keras_rnnlm.config import ConfigError
from keras_rnnlm.layers.activation_regularization import (
    ActivationRegularization,
)
from keras_rnnlm.layers.direct_output_connection import DirectOutputConnection
from keras_rnnlm.layers.embedding_dropout import EmbeddingDropout
from keras_rnnlm.layers.locked_dropout import LockedDropout
from keras_rnnlm.layers.mixture_of_softmaxes import MixtureLogProbs
from keras_rnnlm.layers.mixture_of_softmaxes import MixtureOfSoftmaxes
from keras_rnnlm.layers.one_hot import OneHot
from keras_rnnlm.layers.tied_embedding import TiedEmbedding
from keras_rnnlm.layers.weight_drop_lstm import WeightDropLSTM
from keras_rnnlm.models.recurrent_registry import make_recurrent_layer

HEADS = ("softmax", "tied", "mos", "doc")
TIED_HEADS = ("tied", "mos", "doc")
RNN_INITS = (None, "pytorch")
INPUT_ENCODINGS = ("embedding", "one_hot")


def _initializer(init_range, seed, offset):
    if init_range is None:
        return None
    return keras.initializers.RandomUniform(
        -init_range, init_range, seed=None if seed is None else seed + offset
    )


def _fan_initializer(fan, seed, offset):
    """PyTorch's default U(-1/sqrt(fan), 1/sqrt(fan))."""
    return _initializer(1.0 / math.sqrt(fan), seed, offset)


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
    if config.input_encoding == "one_hot" and config.head in TIED_HEADS:
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
    for key in (
        "dropout",
        "dropouti",
        "dropouth",
        "dropoute",
        "weight_dropout",
        "dropoutl",
    ):
        value = getattr(config, key)
        if value is not None and not 0.0 <= value < 1.0:
            raise ConfigError(f"model.{key} must be in [0, 1): {value}")
    if config.rnn_init not in RNN_INITS:
        raise ConfigError(
            f"model.rnn_init must be one of {RNN_INITS}: {config.rnn_init!r}"
        )
    if config.weight_dropout and config.cell != "lstm":
        raise ConfigError(
            "model.weight_dropout needs model.cell='lstm' (the fused "
            f"weight-dropped LSTM), got {config.cell!r}"
        )
    if config.head == "mos" and not isinstance(config.mixture_components, int):
        raise ConfigError(
            "model.head='mos' needs model.mixture_components = K (an int)"
        )
    if config.head == "doc":
        comps = config.mixture_components
        if (
            not isinstance(comps, (list, tuple))
            or len(comps) != len(config.hidden_sizes) + 1
            or sum(comps) < 1
        ):
            raise ConfigError(
                "model.head='doc' needs model.mixture_components = [i_0, "
                "..., i_L], one count per source (embedding + each of the "
                f"{len(config.hidden_sizes)} recurrent layers), got {comps!r}"
            )


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
    elif config.head in TIED_HEADS:
        embedding = TiedEmbedding(
            vocab_size, config.embedding_dim, name="embedding", **emb_kwargs
        )
    else:
        embedding = keras.layers.Embedding(
            vocab_size, config.embedding_dim, name="embedding", **emb_kwargs
        )
    x = embedding(tokens)
    if config.dropoute:
        x = EmbeddingDropout(
            vocab_size,
            config.dropoute,
            seed=_seed(seed, 150),
            name="embedding_dropout",
        )([tokens, x])

    def dropout(x, i, rate):
        if not rate:
            return x
        if config.locked_dropout:
            return LockedDropout(
                rate, seed=_seed(seed, 100 + i), name=f"locked_dropout_{i}"
            )(x)
        return keras.layers.Dropout(
            rate, seed=_seed(seed, 100 + i), name=f"dropout_{i}"
        )(x)

    def rate(value):
        return config.dropout if value is None else value

    x = dropout(x, 0, rate(config.dropouti))
    sources = [x]
    n_layers = len(config.hidden_sizes)
    raw = x
    for i, units in enumerate(config.hidden_sizes):
        if config.rnn_init == "pytorch":
            rnn_init = _fan_initializer(units, seed, i + 1)
        else:
            rnn_init = _initializer(config.init_range, seed, i + 1)
        if config.weight_dropout:
            layer = _weight_drop_lstm(
                units, config, stateful, rnn_init, _seed(seed, 200 + i), i
            )
        else:
            layer = make_recurrent_layer(
                config.cell,
                units,
                stateful=stateful,
                initializer=rnn_init,
                name=f"rnn_{i}",
                **config.cell_kwargs,
            )
        raw = layer(x)
        last = i == n_layers - 1
        x = dropout(
            raw, i + 1, config.dropout if last else rate(config.dropouth)
        )
        sources.append(x)
    if config.ar_alpha or config.tar_beta:
        x = ActivationRegularization(
            config.ar_alpha, config.tar_beta, name="activation_regularization"
        )([x, raw])
        sources[-1] = x
    if config.head == "tied":
        logits = embedding(x, reverse=True)
    elif config.head in ("mos", "doc"):
        logits = _mixture_head(config, embedding, sources, seed)
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


def _seed(seed, offset):
    return None if seed is None else seed + offset


def _weight_drop_lstm(units, config, stateful, initializer, seed, i):
    kw = dict(config.cell_kwargs)
    if initializer is not None:
        kw.update(
            kernel_initializer=initializer,
            recurrent_initializer=initializer,
            bias_initializer=initializer,
        )
        kw.setdefault("unit_forget_bias", False)
    return WeightDropLSTM(
        units,
        weight_dropout=config.weight_dropout,
        seed=seed,
        return_sequences=True,
        stateful=stateful,
        name=f"rnn_{i}",
        **kw,
    )


def _mixture_head(config, embedding, sources, seed):
    """MoS / DOC: latents -> tied decoder -> mixture log-probabilities."""
    if config.rnn_init == "pytorch":
        fan = sources[-1].shape[-1]
        init = _fan_initializer(fan, seed, 98)
    else:
        init = _initializer(config.init_range, seed, 98)
    kw = {"kernel_initializer": init, "bias_initializer": init} if init else {}
    if config.head == "mos":
        head = MixtureOfSoftmaxes(
            config.mixture_components,
            config.embedding_dim,
            latent_dropout=config.dropoutl,
            seed=_seed(seed, 300),
            name="mos",
            **kw,
        )
        latent, prior_logits = head(sources[-1])
    else:
        head = DirectOutputConnection(
            config.mixture_components,
            config.embedding_dim,
            latent_dropout=config.dropoutl,
            cv_penalty=config.cv_penalty,
            seed=_seed(seed, 300),
            name="doc",
            **kw,
        )
        latent, prior_logits = head(sources)
    component_logits = embedding(latent, reverse=True)
    return MixtureLogProbs(name="mixture")([component_logits, prior_logits])


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
