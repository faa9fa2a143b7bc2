"""The one model builder: embedding -> recurrent stack -> output head.

The same :class:`~keras_rnnlm.config.ModelConfig` builds the training model
(stateful, fixed batch size), evaluation models with other batch sizes (the
weights are copied with :func:`~keras_rnnlm.models.weights.copy_weights`)
and, later, the stateless inference graph for export.

:func:`build_language_model` assembles the model from the helpers below,
in graph order: the inputs, the input encoding (:func:`_input_encoding`,
:func:`_embed`), the recurrent stack (:func:`_recurrent_stack`, one
:func:`_recurrent_layer` per entry of ``hidden_sizes``, with the dropout
rates of :func:`layer_dropouts`) and the output head (:func:`_output_head`).
"""

import contextlib
import random

import keras

from keras_rnnlm.config import ConfigError
from keras_rnnlm.layers.activation_regularization import (
    ActivationRegularization,
)
from keras_rnnlm.layers.cbow_context import DEFAULT_ALPHA
from keras_rnnlm.layers.cbow_context import DEFAULT_WINDOW
from keras_rnnlm.layers.cbow_context import WEIGHTINGS as CONTEXT_WEIGHTINGS
from keras_rnnlm.layers.cbow_context import CBOWContext
from keras_rnnlm.layers.direct_output_connection import DirectOutputConnection
from keras_rnnlm.layers.embedding_dropout import EmbeddingDropout
from keras_rnnlm.layers.locked_dropout import LockedDropout
from keras_rnnlm.layers.major_minor_lstm import MINOR_INPUTS
from keras_rnnlm.layers.major_minor_lstm import split_units
from keras_rnnlm.layers.mixture_of_softmaxes import MixtureLogProbs
from keras_rnnlm.layers.mixture_of_softmaxes import MixtureOfSoftmaxes
from keras_rnnlm.layers.one_hot import OneHot
from keras_rnnlm.layers.rows import Dense
from keras_rnnlm.layers.rows import Embedding
from keras_rnnlm.layers.sampled_softmax import SampledSoftmaxDense
from keras_rnnlm.layers.tied_embedding import TiedEmbedding
from keras_rnnlm.models.initializers import fan_uniform
from keras_rnnlm.models.initializers import lstm_branch_uniform
from keras_rnnlm.models.initializers import uniform
from keras_rnnlm.models.pretrained import pretrained_spec
from keras_rnnlm.models.recurrent_registry import SET_BY_BUILDER
from keras_rnnlm.models.recurrent_registry import make_recurrent_layer
from keras_rnnlm.models.recurrent_registry import recurrent_layer_arguments
from keras_rnnlm.models.recurrent_registry import recurrent_layer_names

HEADS = ("softmax", "tied", "mos", "doc")
TIED_HEADS = ("tied", "mos", "doc")
#: The heads of one softmax over the vocabulary (not a mixture).
SOFTMAX_HEADS = ("softmax", "tied")
RNN_INITS = (None, "pytorch")
INPUT_ENCODINGS = ("embedding", "one_hot")
#: ``model.context["type"]`` values: the CBOW context of arXiv:2106.08927.
CONTEXT_TYPES = ("cbow",)
#: Registry layers that take a sentence-level reset mask (``reset_input``):
#: every registered layer (Keras's own ``keras_lstm``, ``gru`` and
#: ``simple_rnn`` without their ``dropout`` / ``recurrent_dropout``); not a
#: Keras cell passed as ``model.cell`` from Python.
RESET_CELLS = (
    "lstm",
    "weight_drop_lstm",
    "mmlstm",
    "multicell_lstm",
    "mrnn",
    "mlstm",
    "tmlstm",
    "mgru",
    "tmgru",
    "keras_lstm",
    "gru",
    "simple_rnn",
)
#: Cells whose weights ``model.weight_dropout`` drops (DropConnect).
WEIGHT_DROP_CELLS = ("lstm", "weight_drop_lstm", "mmlstm")

# Seed offsets. Every stream of randomness in a model is seeded with
# ``seed + offset`` (``build_language_model(seed=...)``), one offset per
# stream, so that no two streams share a seed and a seeded run is
# reproducible. Do not change the values: every seeded run (and every
# recorded result) depends on them.
#: Initial embedding table, U(-init_range, init_range).
EMBEDDING_INIT_SEED = 0
#: Initial weights of recurrent layer ``i``: ``+ i`` (i < 97).
RECURRENT_INIT_SEED = 1
#: Initial weights of the MoS / DOC latent and prior projections.
MIXTURE_INIT_SEED = 98
#: Initial kernel and bias of the untied softmax decoder.
DECODER_INIT_SEED = 99
#: Dropout masks of dropout ``k`` of :func:`layer_dropouts` (``+ k``; 0:
#: on the embedding output, ``i + 1``: on recurrent layer ``i``'s output;
#: k < 50).
DROPOUT_SEED = 100
#: Embedding dropout (``dropoute``): which word types are dropped.
EMBEDDING_DROPOUT_SEED = 150
#: Sampled softmax: the candidates the sampler draws.
SAMPLER_SEED = 160
#: DropConnect masks of recurrent layer ``i``'s weights (``+ i``, i < 100).
WEIGHT_DROP_SEED = 200
#: MoS / DOC latent dropout (``dropoutl``).
LATENT_DROPOUT_SEED = 300
#: The CBOW context module's embedding table (``model.context``).
CONTEXT_INIT_SEED = 400


def stream_seed(seed, offset):
    """The seed of one stream of randomness (``None``: unseeded)."""
    return None if seed is None else seed + offset


@contextlib.contextmanager
def seeded_defaults(seed):
    """Keras's own default initializers (``model.init_range = None``, the
    character presets) seeded from ``seed`` inside the block.

    A Keras initializer or seed generator made without a seed draws one
    from Python's ``random`` when it is made, so two builds with the same
    ``seed`` would differ unless the process seeded ``random`` just
    before. Inside the block ``random`` is seeded with ``seed``, as
    ``keras.utils.set_random_seed(seed)`` seeds it (so a seeded build
    gives the weights the trainer's runs, which call it first, start
    from), and its state is put back after the block: the build leaves
    the process's generator as it found it. ``None``: nothing is done.
    Not for builds on several threads at once.
    """
    if seed is None:
        yield
        return
    state = random.getstate()
    random.seed(seed)
    try:
        yield
    finally:
        random.setstate(state)


def layer_dropouts(config):
    """The rate of each dropout of the stack, in graph order.

    Returns ``len(config.hidden_sizes) + 1`` rates: ``[0]`` on the
    embedding output (the first layer's input), ``[i + 1]`` on recurrent
    layer ``i``'s output (0: no dropout layer). The rules
    (:class:`~keras_rnnlm.config.ModelConfig`):

    * ``dropouti=None`` and ``dropouth=None`` fall back to ``dropout``;
    * ``dropouth`` is between recurrent layers only: the last layer's
      output (what the head reads) uses ``dropout``, not ``dropouth``.
    """

    def rate(value):
        return config.dropout if value is None else value

    between = [rate(config.dropouth)] * (len(config.hidden_sizes) - 1)
    return [rate(config.dropouti), *between, config.dropout]


def recurrent_layer_name(config):
    """The registry name (:mod:`~keras_rnnlm.models.recurrent_registry`)
    of the config's recurrent layers: ``config.cell``, except that a
    weight-dropped ``lstm`` is a ``weight_drop_lstm``."""
    if config.cell == "lstm" and config.weight_dropout:
        return "weight_drop_lstm"
    return config.cell


def context_spec(config):
    """``config.context`` with its defaults filled in (``None``: no
    context module); raises ConfigError for an invalid one."""
    spec = config.context
    if spec is None:
        return None
    if not isinstance(spec, dict):
        raise ConfigError(f"model.context must be None or a dict, got {spec!r}")
    known = {"type", "weighting", "window", "dim", "alpha"}
    unknown = sorted(set(spec) - known)
    if unknown:
        raise ConfigError(
            f"Unknown key(s) {unknown} in model.context; valid keys: "
            f"{sorted(known)}"
        )
    full = {
        "type": "cbow",
        "weighting": "uniform",
        "window": DEFAULT_WINDOW,
        "dim": config.embedding_dim,
        "alpha": DEFAULT_ALPHA,
        **spec,
    }
    if full["type"] not in CONTEXT_TYPES:
        raise ConfigError(
            f"model.context.type must be one of {CONTEXT_TYPES}, got "
            f"{full['type']!r}"
        )
    if full["weighting"] not in CONTEXT_WEIGHTINGS:
        raise ConfigError(
            f"model.context.weighting must be one of {CONTEXT_WEIGHTINGS}, "
            f"got {full['weighting']!r}"
        )
    for key in ("window", "dim"):
        value = full[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(
                f"model.context.{key} must be an int >= 1, got {value!r}"
            )
    alpha = full["alpha"]
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool):
        raise ConfigError(f"model.context.alpha must be a number: {alpha!r}")
    if not alpha >= 1.0:
        raise ConfigError(f"model.context.alpha must be >= 1, got {alpha}")
    return full


def validate_model_config(config):
    """Raises ConfigError for inconsistent model settings: the names only
    the builder knows (heads, input encodings, initialisations, context
    and pretrained specs) and the rules that tie several fields together.
    Each field's own type and range is checked when the
    :class:`~keras_rnnlm.config.ModelConfig` is made."""
    context_spec(config)
    pretrained_spec(config)
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
    if config.head == "tied" and config.hidden_sizes[-1] != (
        config.embedding_dim
    ):
        raise ConfigError(
            "A tied output layer needs the last recurrent layer's size "
            f"({config.hidden_sizes[-1]}) to equal model.embedding_dim "
            f"({config.embedding_dim})"
        )
    if config.rnn_init not in RNN_INITS:
        raise ConfigError(
            f"model.rnn_init must be one of {RNN_INITS}: {config.rnn_init!r}"
        )
    _validate_cell_name(config)
    if config.weight_dropout and config.cell not in WEIGHT_DROP_CELLS:
        raise ConfigError(
            f"model.weight_dropout needs model.cell in {WEIGHT_DROP_CELLS} "
            f"(the fused weight-dropped LSTM), got {config.cell!r}"
        )
    _validate_major_minor(config)
    _validate_cell_kwargs(config)
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


#: Where the arguments the builder gives a recurrent layer come from
#: (none of them may be in ``model.cell_kwargs``).
BUILDER_ARGUMENT_SOURCES = {
    "units": "model.hidden_sizes",
    "stateful": "the model being built",
    "initializer": "model.init_range and model.rnn_init",
    "name": "the layer's place in the stack",
    "major_proportion": "model.major_proportions",
    "minor_input": "model.minor_input",
    "weight_dropout": "model.weight_dropout",
    "seed": "train.seed",
}


def _validate_cell_name(config):
    """``model.cell`` is a registered layer (a Keras cell given from
    Python is not checked)."""
    names = recurrent_layer_names()
    if isinstance(config.cell, str) and config.cell not in names:
        raise ConfigError(
            f"model.cell: unknown recurrent layer {config.cell!r}; known: "
            f"{', '.join(names)}",
            key="model.cell",
        )


def _validate_cell_kwargs(config):
    """``model.cell_kwargs`` holds only arguments of the layer's
    constructor (its signature, :func:`~keras_rnnlm.models.
    recurrent_registry.recurrent_layer_arguments`) that the builder
    leaves to the config."""
    if not isinstance(config.cell, str):
        return
    cell = recurrent_layer_name(config)
    builder_set = {*SET_BY_BUILDER, *_builder_layer_kwargs(config, cell, 0)}
    accepted = recurrent_layer_arguments(cell)
    for key in config.cell_kwargs:
        if key in builder_set or (accepted is not None and key not in accepted):
            raise ConfigError(
                _cell_kwarg_message(cell, key, builder_set, accepted),
                key="model.cell_kwargs",
            )


def _cell_kwarg_message(cell, key, builder_set, accepted):
    source = BUILDER_ARGUMENT_SOURCES.get(key)
    if key in builder_set:
        return (
            f"model.cell_kwargs: {key!r} of the {cell!r} layers is set by "
            f"the builder (from {source or 'the model config'}), not by "
            "model.cell_kwargs"
        )
    hint = f" ({key!r} is set by {source})" if source else ""
    return (
        f"model.cell_kwargs: {key!r} is not an argument of the {cell!r} "
        f"layer{hint}; its arguments: {', '.join(sorted(accepted))}"
    )


def _validate_sampled_softmax(config):
    if config.sampled_softmax and config.head not in SOFTMAX_HEADS:
        raise ConfigError(
            "model.sampled_softmax needs a single softmax "
            f"(model.head='softmax' or 'tied'), got {config.head!r}: a "
            "mixture normalises each component over the whole vocabulary"
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
    reset_input=False,
):
    """Builds the language model described by ``config``.

    Args:
        config: a :class:`~keras_rnnlm.config.ModelConfig`.
        vocab_size: number of token types.
        batch_size: fixed batch size (required when ``stateful``).
        stateful: carry recurrent state across calls (training/evaluation
            on a stream); reset it with
            :func:`~keras_rnnlm.models.state.reset_states`.
        seed: seed of the weight initializers and dropout layers (each
            stream of randomness at its own offset, ``*_SEED``; Keras's
            default initializers from it too, :func:`seeded_defaults`).
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
        reset_input: sentence-level training: a float32 input ``reset``
            (batch, time), 1.0 where a sentence starts, at which every
            recurrent layer starts again from its initial state (served
            by :class:`~keras_rnnlm.data.sentences.SentenceResetSequence`).
            The CBOW context (``model.context``) is not reset: it brings
            the previous sentences to the reset LSTM. Recurrent layers:
            :data:`RESET_CELLS`.

    Returns:
        A functional ``keras.Model`` mapping int32 tokens (batch, time) to
        float32 logits (batch, time, vocab); with a ``targets`` or
        ``reset`` input it takes the dict ``{"tokens", "targets",
        "reset"}`` of its inputs.
    """
    validate_model_config(config)
    with seeded_defaults(seed):
        batch_shape = (batch_size if stateful else None, None)
        tokens = keras.Input(
            batch_shape=batch_shape, dtype="int32", name="tokens"
        )
        targets = None
        if targets_input and config.sampled_softmax:
            targets = keras.Input(
                batch_shape=batch_shape, dtype="int32", name="targets"
            )
        reset = None
        if reset_input:
            cell = recurrent_layer_name(config)
            if cell not in RESET_CELLS:
                raise ConfigError(
                    f"Sentence-level state reset is built for the recurrent "
                    f"layers {RESET_CELLS}, not {cell!r}"
                )
            dropped = [
                f"{k}={v}"
                for k, v in config.cell_kwargs.items()
                if k in ("dropout", "recurrent_dropout") and v
            ]
            if dropped:
                raise ConfigError(
                    f"Sentence-level state reset does not support the "
                    f"{cell!r} layer's {', '.join(dropped)} (model.cell_kwargs)"
                )
            reset = keras.Input(
                batch_shape=batch_shape, dtype="float32", name="reset"
            )
        embedding = _input_encoding(config, vocab_size, seed)
        x = _embed(config, embedding, tokens, vocab_size, seed)
        if config.context is not None:
            x = _with_context(config, x, tokens, vocab_size, stateful, seed)
        sources, raw = _recurrent_stack(
            config, x, stateful, seed, recurrent_output_hook, reset
        )
        if config.ar_alpha or config.tar_beta:
            sources[-1] = ActivationRegularization(
                config.ar_alpha,
                config.tar_beta,
                name="activation_regularization",
            )([sources[-1], raw])
        logits = _output_head(
            config, embedding, sources, vocab_size, seed, targets
        )
        logits = keras.layers.Activation(
            "linear", dtype="float32", name="logits"
        )(logits)
        if targets is not None or reset is not None:
            inputs = {"tokens": tokens}
            if targets is not None:
                inputs["targets"] = targets
            if reset is not None:
                inputs["reset"] = reset
            return keras.Model(inputs, logits, name=name)
        return keras.Model(tokens, logits, name=name)


def _sampled_softmax_kwargs(config):
    return {
        "num_sampled": config.sampled_softmax,
        "sampler_power": config.sampler_power,
    }


def _input_encoding(config, vocab_size, seed):
    """The token encoding layer: one-hot, or an embedding table (the
    tied heads' decoder too)."""
    init = uniform(config.init_range, stream_seed(seed, EMBEDDING_INIT_SEED))
    kwargs = {"embeddings_initializer": init} if init else {}
    if config.input_encoding == "one_hot":
        return OneHot(vocab_size, name="one_hot")
    if config.head not in TIED_HEADS:
        return Embedding(
            vocab_size, config.embedding_dim, name="embedding", **kwargs
        )
    if config.head == "tied":
        kwargs.update(
            _sampled_softmax_kwargs(config),
            sampler_seed=stream_seed(seed, SAMPLER_SEED),
        )
    return TiedEmbedding(
        vocab_size, config.embedding_dim, name="embedding", **kwargs
    )


def _embed(config, embedding, tokens, vocab_size, seed):
    """The encoded tokens, with embedding dropout (``dropoute``)."""
    x = embedding(tokens)
    if config.dropoute:
        x = EmbeddingDropout(
            vocab_size,
            config.dropoute,
            seed=stream_seed(seed, EMBEDDING_DROPOUT_SEED),
            name="embedding_dropout",
        )([tokens, x])
    return x


def _with_context(config, x, tokens, vocab_size, stateful, seed):
    """``[x, d]``: the encoded tokens and the context vector of
    ``model.context`` (its own table, stateful with the recurrent layers;
    dropout 0 of :func:`layer_dropouts` then drops both)."""
    spec = context_spec(config)
    init = uniform(config.init_range, stream_seed(seed, CONTEXT_INIT_SEED))
    context = CBOWContext(
        vocab_size,
        spec["dim"],
        weighting=spec["weighting"],
        window=spec["window"],
        alpha=spec["alpha"],
        embeddings_initializer=init or "uniform",
        stateful=stateful,
        name="cbow_context",
    )(tokens)
    return keras.layers.Concatenate(name="with_context")([x, context])


def _dropout(config, x, k, rate, seed):
    """Dropout ``k`` of :func:`layer_dropouts` on ``x`` (locked or not)."""
    if not rate:
        return x
    k_seed = stream_seed(seed, DROPOUT_SEED + k)
    if config.locked_dropout:
        return LockedDropout(rate, seed=k_seed, name=f"locked_dropout_{k}")(x)
    return keras.layers.Dropout(rate, seed=k_seed, name=f"dropout_{k}")(x)


def _recurrent_stack(config, x, stateful, seed, hook, reset=None):
    """The recurrent layers on the encoded tokens ``x``, each output
    dropped with its rate of :func:`layer_dropouts`.

    Returns:
        ``(sources, raw)``: ``sources`` the dropped embedding output and
        the dropped output of each layer (what a DOC head reads; the last
        is the head's input), ``raw`` the last layer's output before
        dropout (what TAR reads).
    """
    rates = layer_dropouts(config)
    x = _dropout(config, x, 0, rates[0], seed)
    sources = [x]
    raw = x
    for i, units in enumerate(config.hidden_sizes):
        layer = _recurrent_layer(config, i, units, stateful, seed)
        inputs = x
        if config.cell == "mmlstm" and config.minor_input == "embedding":
            # MMLM-1: the Minor LSTM reads the embedding output after
            # dropouti (the first layer's input).
            inputs = [x, sources[0]]
        if reset is None:
            raw = layer(inputs)
        else:
            raw = layer(inputs, reset=reset)
        if hook is not None:
            raw = hook(i, raw)
        x = _dropout(config, raw, i + 1, rates[i + 1], seed)
        sources.append(x)
    return sources, raw


def _recurrent_layer(config, i, units, stateful, seed):
    """Recurrent layer ``i`` (``rnn_{i}``), from the registry."""
    cell = recurrent_layer_name(config)
    return make_recurrent_layer(
        cell,
        units,
        stateful=stateful,
        initializer=_recurrent_initializer(config, cell, units, seed, i),
        name=f"rnn_{i}",
        **config.cell_kwargs,
        **_builder_layer_kwargs(config, cell, i, seed),
    )


def _builder_layer_kwargs(config, cell, i, seed=None):
    """The arguments of recurrent layer ``i`` that the builder sets from
    other config fields (:data:`BUILDER_ARGUMENT_SOURCES`)."""
    kwargs = {}
    if cell == "mmlstm":
        kwargs.update(
            major_proportion=config.major_proportions[i],
            minor_input=config.minor_input,
        )
    if cell in ("mmlstm", "weight_drop_lstm"):
        kwargs.update(
            weight_dropout=config.weight_dropout,
            seed=stream_seed(seed, WEIGHT_DROP_SEED + i),
        )
    return kwargs


def _recurrent_initializer(config, cell, units, seed, i):
    """Layer ``i``'s initializer: ``init_range``'s U(-r, r) (``None``:
    Keras's defaults) or, with ``rnn_init="pytorch"``, PyTorch's
    U(+-1/sqrt(H)), ``H`` the layer's size or, for an MMLSTM, each
    branch's size (they are two LSTMs in the reference code)."""
    layer_seed = stream_seed(seed, RECURRENT_INIT_SEED + i)
    if config.rnn_init != "pytorch":
        return uniform(config.init_range, layer_seed)
    if cell == "mmlstm":
        return lstm_branch_uniform(layer_seed)
    return fan_uniform(units, layer_seed)


def _output_head(config, embedding, sources, vocab_size, seed, targets):
    """The logits: the tied embedding, a mixture (MoS / DOC) or a dense
    decoder (sampled in training with ``targets``)."""
    x = sources[-1]
    if config.head == "tied":
        return embedding(x, reverse=True, targets=targets)
    if config.head in ("mos", "doc"):
        return _mixture_head(config, embedding, sources, seed)
    init = uniform(config.init_range, stream_seed(seed, DECODER_INIT_SEED))
    kwargs = (
        {"kernel_initializer": init, "bias_initializer": init} if init else {}
    )
    if config.sampled_softmax:
        decoder = SampledSoftmaxDense(
            vocab_size,
            seed=stream_seed(seed, SAMPLER_SEED),
            name="decoder",
            **_sampled_softmax_kwargs(config),
            **kwargs,
        )
        return decoder(x, targets=targets)
    return Dense(vocab_size, name="decoder", **kwargs)(x)


def _mixture_head(config, embedding, sources, seed):
    """MoS / DOC: latents -> tied decoder -> mixture log-probabilities."""
    init_seed = stream_seed(seed, MIXTURE_INIT_SEED)
    if config.rnn_init == "pytorch":
        init = fan_uniform(sources[-1].shape[-1], init_seed)
    else:
        init = uniform(config.init_range, init_seed)
    kw = {"kernel_initializer": init, "bias_initializer": init} if init else {}
    kw.update(
        latent_dropout=config.dropoutl,
        seed=stream_seed(seed, LATENT_DROPOUT_SEED),
    )
    if config.head == "mos":
        head = MixtureOfSoftmaxes(
            config.mixture_components, config.embedding_dim, name="mos", **kw
        )
        latent, prior_logits = head(sources[-1])
    else:
        head = DirectOutputConnection(
            config.mixture_components,
            config.embedding_dim,
            cv_penalty=config.cv_penalty,
            name="doc",
            **kw,
        )
        latent, prior_logits = head(sources)
    component_logits = embedding(latent, reverse=True)
    return MixtureLogProbs(name="mixture")([component_logits, prior_logits])
