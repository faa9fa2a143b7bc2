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
from keras_rnnlm.layers.major_minor_lstm import MINOR_INPUTS
from keras_rnnlm.layers.major_minor_lstm import MajorMinorLSTM
from keras_rnnlm.layers.major_minor_lstm import split_units
from keras_rnnlm.layers.mixture_of_softmaxes import MixtureLogProbs
from keras_rnnlm.layers.mixture_of_softmaxes import MixtureOfSoftmaxes
from keras_rnnlm.layers.one_hot import OneHot
from keras_rnnlm.layers.sampled_softmax import SampledSoftmaxDense
from keras_rnnlm.layers.sampled_softmax import UnigramSampler
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
    if config.weight_dropout and config.cell not in ("lstm", "mmlstm"):
        raise ConfigError(
            "model.weight_dropout needs model.cell='lstm' or 'mmlstm' (the "
            f"fused weight-dropped LSTM), got {config.cell!r}"
        )
    _validate_major_minor(config)
    _validate_sampled_softmax(config)
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


def _validate_sampled_softmax(config):
    n = config.sampled_softmax
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ConfigError(
            f"model.sampled_softmax must be an int >= 0, got {n!r}"
        )
    if n and config.head not in ("softmax", "tied"):
        raise ConfigError(
            "model.sampled_softmax needs a single softmax "
            f"(model.head='softmax' or 'tied'), got {config.head!r}: a "
            "mixture normalises each component over the whole vocabulary"
        )
    if config.sampler_power < 0:
        raise ConfigError(
            f"model.sampler_power must be >= 0, got {config.sampler_power}"
        )


def _validate_major_minor(config):
    props = config.major_proportions
    if config.cell != "mmlstm":
        if props is not None:
            raise ConfigError(
                "model.major_proportions is for model.cell='mmlstm', got "
                f"cell={config.cell!r}"
            )
        return
    if config.minor_input not in MINOR_INPUTS:
        raise ConfigError(
            f"model.minor_input must be one of {MINOR_INPUTS}, got "
            f"{config.minor_input!r}"
        )
    if not isinstance(props, (list, tuple)) or len(props) != len(
        config.hidden_sizes
    ):
        raise ConfigError(
            "model.cell='mmlstm' needs model.major_proportions, one Major "
            f"share per layer of {config.hidden_sizes}, got {props!r}"
        )
    for units, r in zip(config.hidden_sizes, props):
        if not isinstance(r, (int, float)) or not 0.0 < r <= 1.0:
            raise ConfigError(
                f"model.major_proportions must be in (0, 1], got {props!r}"
            )
        if split_units(units, r)[0] < 1:
            raise ConfigError(
                f"Major share {r} of a layer of {units} leaves no Major unit"
            )


def build_language_model(
    config,
    vocab_size,
    batch_size,
    stateful=True,
    seed=None,
    name="rnnlm",
    recurrent_output_hook=None,
    targets_input=False,
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
        recurrent_output_hook: optional ``hook(i, outputs) -> outputs``
            applied to the (raw) output of recurrent layer ``i`` (0-based)
            before anything reads it (the dropout after it, the next
            layer, AR/TAR, a DOC head); for analyses such as
            :mod:`keras_rnnlm.analysis.feature_masking`. It must keep the
            shape and add no trainable weight (weights are copied between
            models by their trainable variables).
        targets_input: with ``config.sampled_softmax``, the training
            model: a second int32 input ``targets`` (batch, time), and in
            training the output is the sampled-softmax logits (batch,
            time, S + 1) whose target is column 0 (train on labels 0, as
            :class:`~keras_rnnlm.data.streams.LMSequence` with
            ``targets_as_input`` serves them); outside training the full
            logits. Ignored without ``config.sampled_softmax``.

    Returns:
        A functional ``keras.Model`` mapping int32 tokens (batch, time) to
        float32 logits (batch, time, vocab); with a ``targets`` input it
        takes ``{"tokens", "targets"}``.
    """
    validate_model_config(config)
    batch_shape = (batch_size if stateful else None, None)
    tokens = keras.Input(batch_shape=batch_shape, dtype="int32", name="tokens")
    targets = None
    if targets_input and config.sampled_softmax:
        targets = keras.Input(
            batch_shape=batch_shape, dtype="int32", name="targets"
        )
    sampled = {
        "num_sampled": config.sampled_softmax,
        "sampler_power": config.sampler_power,
    }
    init = _initializer(config.init_range, seed, 0)
    emb_kwargs = {"embeddings_initializer": init} if init else {}
    if config.input_encoding == "one_hot":
        embedding = OneHot(vocab_size, name="one_hot")
    elif config.head in TIED_HEADS:
        if config.head == "tied":
            emb_kwargs.update(sampled, sampler_seed=_seed(seed, 160))
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
        inputs = x
        if config.cell == "mmlstm":
            layer = _major_minor_lstm(units, config, stateful, seed, i)
            if config.minor_input == "embedding":
                # MMLM-1: the Minor LSTM reads the embedding output after
                # dropouti (the first layer's input).
                inputs = [x, sources[0]]
        elif config.weight_dropout:
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
        raw = layer(inputs)
        if recurrent_output_hook is not None:
            raw = recurrent_output_hook(i, raw)
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
        logits = embedding(x, reverse=True, targets=targets)
    elif config.head in ("mos", "doc"):
        logits = _mixture_head(config, embedding, sources, seed)
    else:
        init = _initializer(config.init_range, seed, 99)
        head_kwargs = (
            {"kernel_initializer": init, "bias_initializer": init}
            if init
            else {}
        )
        if config.sampled_softmax:
            decoder = SampledSoftmaxDense(
                vocab_size,
                seed=_seed(seed, 160),
                name="decoder",
                **sampled,
                **head_kwargs,
            )
            logits = decoder(x, targets=targets)
        else:
            logits = keras.layers.Dense(
                vocab_size, name="decoder", **head_kwargs
            )(x)
    logits = keras.layers.Activation("linear", dtype="float32", name="logits")(
        logits
    )
    if targets is not None:
        inputs = {"tokens": tokens, "targets": targets}
        return keras.Model(inputs, logits, name=name)
    return keras.Model(tokens, logits, name=name)


def _seed(seed, offset):
    return None if seed is None else seed + offset


def _lstm_kwargs(config, initializer):
    """``cell_kwargs`` plus one initializer for every LSTM weight (and no
    forget-gate bias of 1 unless asked for)."""
    kw = dict(config.cell_kwargs)
    if initializer is not None:
        kw.update(
            kernel_initializer=initializer,
            recurrent_initializer=initializer,
            bias_initializer=initializer,
        )
        kw.setdefault("unit_forget_bias", False)
    return kw


def _weight_drop_lstm(units, config, stateful, initializer, seed, i):
    kw = _lstm_kwargs(config, initializer)
    return WeightDropLSTM(
        units,
        weight_dropout=config.weight_dropout,
        seed=seed,
        return_sequences=True,
        stateful=stateful,
        name=f"rnn_{i}",
        **kw,
    )


def _major_minor_lstm(units, config, stateful, seed, i):
    """Layer ``i`` of an MMLSTM stack.

    Weights: ``rnn_init="pytorch"`` gives each branch PyTorch's nn.LSTM
    default U(+-1/sqrt(H)) with ``H`` *that branch's* units (they are two
    LSTMs in the reference code): ``VarianceScaling(4/3, "fan_out",
    "uniform")``, whose limit ``sqrt(3 * (4/3) / (4 H))`` is ``1/sqrt(H)``
    for the kernel, recurrent kernel and bias alike (fan-out ``4 H``);
    otherwise ``init_range``'s U(-r, r) (or Keras's defaults).
    """
    if config.rnn_init == "pytorch":
        init = keras.initializers.VarianceScaling(
            4.0 / 3.0, "fan_out", "uniform", seed=_seed(seed, i + 1)
        )
    else:
        init = _initializer(config.init_range, seed, i + 1)
    kw = _lstm_kwargs(config, init)
    return MajorMinorLSTM(
        units,
        major_proportion=config.major_proportions[i],
        minor_input=config.minor_input,
        weight_dropout=config.weight_dropout,
        seed=_seed(seed, 200 + i),
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
    """The model's stateful recurrent layers (anything stateful with
    ``reset_state``), outermost first: the branches inside a composite
    recurrent layer (:class:`MajorMinorLSTM`) are its business and are
    not listed."""
    found = []

    def walk(layer):
        for sub in layer._flatten_layers(include_self=False, recursive=False):
            if hasattr(sub, "reset_state") and getattr(sub, "stateful", 0):
                found.append(sub)
            else:
                walk(sub)

    walk(model)
    return found


def has_targets_input(model):
    """Whether ``model`` is a sampled-softmax training model (it takes
    ``{"tokens", "targets"}``; see :func:`build_language_model`)."""
    return isinstance(model.input, dict) and "targets" in model.input


def _samplers(model):
    """The candidate samplers of the model's decoder (tied embedding or
    ``SampledSoftmaxDense``)."""
    found = [getattr(layer, "sampler", None) for layer in model.layers]
    return [s for s in found if isinstance(s, UnigramSampler)]


def model_parameters(model):
    """``model.count_params()`` without the candidate samplers' word
    counts (data, not parameters)."""
    return model.count_params() - sum(s.vocab_size for s in _samplers(model))


def set_sampler_counts(model, train_ids):
    """Sets every candidate sampler's proposal from the training ids
    (a no-op for a model without a sampled softmax)."""
    import numpy as np

    samplers = _samplers(model)
    for sampler in samplers:
        counts = np.bincount(
            np.asarray(train_ids).ravel(), minlength=sampler.vocab_size
        )
        sampler.set_counts(counts[: sampler.vocab_size])
    return len(samplers)


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
        # A copy: on JAX, assigning the array itself would alias the two
        # models' buffers, and a compiled step of one (which donates its
        # variables' buffers) would delete the other's weights.
        d.assign(keras.ops.copy(s.value))
