"""Parameter counts of builder models, and sizes solved for a budget.

:func:`count_params` counts the trainable parameters of the model that
:func:`~keras_rnnlm.models.builder.build_language_model` makes from a
:class:`~keras_rnnlm.config.ModelConfig` without building it (a 24M
parameter model would take seconds to allocate and initialise): exactly,
in closed form, for LSTM and Major-Minor LSTM stacks (``cell`` =
``lstm``, ``weight_drop_lstm``, ``keras_lstm``, ``mmlstm``; weight-dropped
or not) with any head (``softmax``, ``tied``, ``mos``, ``doc``), either
input encoding and a ``model.context`` module (its table, ``V * dim``, and
the ``dim`` extra inputs of the first layer); other cells are counted by
building a stateless model.

:func:`solve_sizes` is the Table IX rule of the Major-Minor LSTM paper:
"set different overall output sizes to ensure that the parameter counts
of each model roughly equal" -- the chosen layers are scaled together
(sizes multiples of ``step``) to the model closest to a parameter budget.

For the character-level comparisons of the multiplicative cells,
:func:`cell_params` counts one cell, :func:`char_model_params` a one-layer
character model and :func:`solve_char_units` finds the hidden size of a
parameter budget (how the multiplicative-models paper matches its models).
"""

import dataclasses
import math

from keras_rnnlm.config import ConfigError
from keras_rnnlm.layers.major_minor_lstm import count_params as mmlstm_params
from keras_rnnlm.layers.multiplicative import CELLS as MULTIPLICATIVE_CELLS
from keras_rnnlm.models.builder import build_language_model
from keras_rnnlm.models.builder import context_spec

#: Cells counted in closed form (one fused LSTM per layer or branch).
LSTM_CELLS = ("lstm", "weight_drop_lstm", "keras_lstm", "mmlstm")


def count_params(config, vocab_size, num_biases=1):
    """Trainable parameters of the model ``config`` describes.

    Args:
        config: a :class:`~keras_rnnlm.config.ModelConfig`.
        vocab_size: vocabulary size.
        num_biases: 1 (Keras) or 2 (PyTorch's two LSTM bias vectors, how
            the papers count): closed-form counts only.
    """
    if config.cell not in LSTM_CELLS:
        if num_biases != 1:
            raise ValueError(
                f"num_biases={num_biases} needs a closed-form count; cell "
                f"{config.cell!r} is counted by building the model"
            )
        return built_params(config, vocab_size)
    v = vocab_size
    if config.input_encoding == "one_hot":
        n, emb_out = 0, v
    else:
        n, emb_out = v * config.embedding_dim, config.embedding_dim
    spec = context_spec(config)
    if spec is not None:  # the CBOW table; [embedding, d_t] feeds layer 0
        n += v * spec["dim"]
        emb_out += spec["dim"]
    sizes = list(config.hidden_sizes)
    props = (
        config.major_proportions
        if config.cell == "mmlstm"
        else [1.0] * len(sizes)
    )
    prev = emb_out
    for size, r in zip(sizes, props):
        minor_in = prev
        if config.cell == "mmlstm" and config.minor_input == "embedding":
            minor_in = emb_out
        n += mmlstm_params(size, r, prev, minor_in, num_biases=num_biases)
        prev = size
    return n + _head_params(config, v, [emb_out, *sizes])


def _head_params(config, v, dims):
    e, last = config.embedding_dim, dims[-1]
    if config.head == "softmax":
        return last * v + v
    if config.head == "tied":
        return v  # the decoder bias; the matrix is the embedding's
    if config.head == "mos":
        k = config.mixture_components
        return v + last * k * e + k * e + last * k
    if config.head == "doc":
        comps = list(config.mixture_components)
        latents = sum(d * i * e + i * e for d, i in zip(dims, comps) if i)
        return v + latents + last * sum(comps)
    raise ConfigError(f"Unknown head {config.head!r}")


def built_params(config, vocab_size):
    """Trainable parameters of a built (stateless) model: exact for every
    cell, but allocates the weights."""
    model = build_language_model(config, vocab_size, None, stateful=False)
    return int(sum(math.prod(w.shape) for w in model.trainable_weights))


def solve_sizes(
    config,
    vocab_size,
    budget,
    layers,
    step=10,
    max_size=100_000,
    num_biases=1,
):
    """``config`` with layers ``layers`` resized to a parameter budget.

    The solved layers (0-based indices) keep their size ratios in
    ``config`` (equal sizes stay equal: Table IX's first two layers): the
    largest of them gets the size ``S``, a multiple of ``step``, and each
    other one ``S`` times its ratio, rounded to a multiple of ``step``
    (at least ``step``). ``S`` is the one that brings :func:`count_params`
    closest to ``budget`` (the smaller on a tie); the count grows with
    ``S``, so it is found by bisection. Other layers, the Major
    proportions and everything else are kept.

    Raises:
        ConfigError: no layer to solve, a tied head's last layer (it must
            equal ``embedding_dim``), or a budget that even ``S = step``
            exceeds or ``max_size`` does not reach.
    """
    layers = sorted(set(int(i) for i in layers))
    n_layers = len(config.hidden_sizes)
    if not layers or not all(0 <= i < n_layers for i in layers):
        raise ConfigError(
            f"Layers to solve must be in 0..{n_layers - 1}, got {layers}"
        )
    if config.head == "tied" and n_layers - 1 in layers:
        raise ConfigError(
            "The last layer of a tied head must equal model.embedding_dim: "
            "it cannot be solved for a parameter budget"
        )
    base = list(config.hidden_sizes)
    largest = max(base[i] for i in layers)

    def resized(size):
        sizes = list(base)
        for i in layers:
            scaled = round(size * base[i] / largest / step) * step
            sizes[i] = size if base[i] == largest else max(step, scaled)
        return dataclasses.replace(config, hidden_sizes=sizes)

    def count(k):
        return count_params(resized(k * step), vocab_size, num_biases)

    lo, hi = 1, max(1, max_size // step)
    if count(lo) > budget:
        raise ConfigError(
            f"A budget of {budget:,} parameters is below the model with "
            f"size {step} for layers {layers} ({count(lo):,})"
        )
    if count(hi) < budget:
        raise ConfigError(
            f"A budget of {budget:,} parameters needs layers {layers} "
            f"larger than {hi * step}"
        )
    while hi - lo > 1:  # count(lo) <= budget <= count(hi)
        mid = (lo + hi) // 2
        if count(mid) <= budget:
            lo = mid
        else:
            hi = mid
    best = lo if budget - count(lo) <= count(hi) - budget else hi
    return resized(best * step)


def cell_params(cell, units, input_dim, intermediate_size=None):
    """Parameter count of one recurrent cell, without building it.

    Args:
        cell: a key of :data:`keras_rnnlm.layers.multiplicative.CELLS` or
            ``"lstm"`` / ``"gru"`` (Keras layers with one bias vector,
            ``reset_after=False`` for GRU).
        units: hidden size.
        input_dim: input size.
        intermediate_size: ``M`` (``None``: ``input_dim``).
    """
    h, d = units, input_dim
    m = intermediate_size or d
    if cell == "lstm":
        return 4 * h * (d + h + 1)
    if cell == "gru":
        return 3 * h * (d + h + 1)
    if cell not in MULTIPLICATIVE_CELLS:
        raise ValueError(
            f"Unknown cell {cell!r}; known {sorted(MULTIPLICATIVE_CELLS)}"
        )
    shapes = MULTIPLICATIVE_CELLS[cell](units)._weight_shapes(d, m)
    total = 0
    for shape, _ in shapes.values():
        n = 1
        for s in shape:
            n *= s
        total += n
    return total


def char_model_params(cell, units, vocab_size, intermediate_size=None):
    """Parameters of a one-layer character model: one-hot input, ``cell``,
    softmax output (``units * vocab + vocab``)."""
    return (
        cell_params(cell, units, vocab_size, intermediate_size)
        + units * vocab_size
        + vocab_size
    )


def solve_char_units(cell, target, vocab_size, intermediate_size=None):
    """The hidden size whose one-layer character model is closest to
    ``target`` parameters (see :func:`char_model_params`)."""
    best, best_err = 1, None
    for units in range(1, 20000):
        n = char_model_params(cell, units, vocab_size, intermediate_size)
        err = abs(n - target)
        if best_err is None or err < best_err:
            best, best_err = units, err
        if n > target:
            break
    return best
