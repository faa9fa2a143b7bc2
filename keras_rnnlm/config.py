"""Run configuration: plain dataclasses, validated, with dotted overrides.

A run is described by a :class:`RunConfig` with three sections, ``data``,
``model`` and ``train``. Configs round-trip through JSON (``to_dict`` /
``from_dict``); unknown keys are errors everywhere (a typo in a recipe or a
``--set`` override must never be silently ignored).
"""

import dataclasses
import json
from typing import Any


class ConfigError(ValueError):
    """An invalid configuration key or value."""


@dataclasses.dataclass
class DataConfig:
    """Corpus and token-stream settings.

    Attributes:
        corpus: registry name (``ptb``, ``ptb_char``, ``wikitext2``,
            ``wikitext103``, ``text8``) or a path to a directory with
            ``train.txt`` / ``valid.txt`` / ``test.txt``.
        data_dir: where the corpora live (else ``$KERAS_RNNLM_DATA``, the
            Keras cache, or a download).
        level: ``word`` or ``char`` for a corpus given by path.
        batch_size: training batch size (number of parallel streams).
        bptt: truncated-BPTT window length.
        variable_bptt: the AWD-LSTM random window rule.
        eval_batch_size: validation batch size (``None``: ``batch_size``).
        test_batch_size: test batch size.
        eval_bptt: evaluation window (``None``: ``bptt``).
        max_tokens: truncate every split (smoke tests).
        max_train_tokens: train on the first this many training tokens
            only; validation and test stay whole (short-budget modes).
        bptt_max_delta: variable BPTT: clip drawn lengths at
            ``bptt + delta`` (MoS/DOC ``max_seq_len_delta``).
        bptt_multiple: variable BPTT: round drawn lengths to the nearest
            multiple of this (1: exact lengths), which bounds the number
            of distinct traced/compiled shapes.
    """

    corpus: str = "ptb"
    data_dir: str | None = None
    level: str | None = None
    batch_size: int = 20
    bptt: int = 35
    variable_bptt: bool = False
    eval_batch_size: int | None = None
    test_batch_size: int = 1
    eval_bptt: int | None = None
    max_tokens: int | None = None
    max_train_tokens: int | None = None
    bptt_max_delta: int | None = None
    bptt_multiple: int = 1


@dataclasses.dataclass
class ModelConfig:
    """Embedding -> recurrent stack -> output head.

    Attributes:
        embedding_dim: word-embedding size (ignored with
            ``input_encoding="one_hot"``).
        input_encoding: ``embedding`` (a learned embedding table) or
            ``one_hot`` (the input is the one-hot vector of the token, as in
            character-level models; no embedding parameters).
        hidden_sizes: one entry per recurrent layer.
        cell: recurrent layer name (see
            :func:`keras_rnnlm.models.recurrent_layer_names`), e.g.
            ``lstm`` (weight-dropped with ``weight_dropout``: the
            registry's ``weight_drop_lstm``) or ``mmlstm`` for Major-Minor
            LSTM layers
            (:class:`keras_rnnlm.layers.major_minor_lstm.MajorMinorLSTM`,
            weight-dropped with ``weight_dropout``).
        cell_kwargs: extra constructor arguments of that layer.
        head: ``softmax`` (own output matrix) or ``tied`` (the embedding
            matrix transposed, with its own bias).
        dropout: dropout on non-recurrent connections (embedding output,
            between layers, before the head), as in Zaremba et al.
        init_range: if set, every weight is drawn from U(-r, r).
        rnn_init: ``None`` (recurrent layers and head projections use
            ``init_range``) or ``"pytorch"`` (they use PyTorch's default
            U(-1/sqrt(n), 1/sqrt(n)), n = units for recurrent layers and
            fan-in for projections, as the AWD-LSTM/MoS/DOC code does;
            the embedding keeps ``init_range``).
        locked_dropout: use locked (variational) dropout, one mask per
            sequence shared over time, instead of per-element dropout.
        dropouti: dropout on the embedding output (``None``: ``dropout``).
        dropouth: dropout between recurrent layers (``None``: ``dropout``);
            ``dropout`` itself is then the last layer's output dropout.
        dropoute: embedding dropout (whole word types, AWD-LSTM).
        weight_dropout: DropConnect on each LSTM's recurrent kernel
            (AWD-LSTM ``wdrop``; needs ``cell="lstm"`` or ``"mmlstm"``).
        major_proportions: ``cell="mmlstm"``: one Major share ``r`` in
            ``(0, 1]`` per layer (the Major LSTM has ``round(r * size)``
            units, the Minor LSTM the rest; 1: a plain LSTM layer).
        minor_input: ``cell="mmlstm"``: what the Minor LSTMs read,
            ``embedding`` (the embedding output after ``dropouti``,
            MMLM-1) or ``previous`` (the previous layer's output, MMLM-2).
        mixture_components: ``head="mos"``: the number of experts K;
            ``head="doc"``: ``[i_0, ..., i_L]`` components per source
            (embedding, then each recurrent layer).
        dropoutl: locked dropout on the MoS/DOC latents.
        cv_penalty: DOC's lambda_beta (coefficient-of-variation penalty).
        ar_alpha: activation regularisation (AR) on the dropped last output.
        tar_beta: temporal activation regularisation (TAR) on the raw last
            output.
        sampled_softmax: ``head="softmax"`` or ``"tied"``: train with a
            sampled softmax over this many candidate words per step
            (:mod:`keras_rnnlm.layers.sampled_softmax`; 0: the full
            softmax). Validation, test and every exported model use the
            full softmax.
        sampler_power: the candidate proposal is ``(count + 1) ** power``
            over the training counts (1: unigram, 0: uniform).
        context: a long-term context module concatenated to the word
            embedding before the recurrent layers: ``None`` or
            ``{"type": "cbow", "weighting": "uniform" | "positional" |
            "idf", "window": K, "dim": size, "alpha": base}`` (defaults
            K = 100, size = ``embedding_dim``, base = 1.05), the CBOW
            context vector (:mod:`keras_rnnlm.layers.cbow_context`).
    """

    embedding_dim: int = 200
    input_encoding: str = "embedding"
    hidden_sizes: list = dataclasses.field(default_factory=lambda: [200, 200])
    cell: str = "lstm"
    cell_kwargs: dict = dataclasses.field(default_factory=dict)
    head: str = "softmax"
    dropout: float = 0.0
    init_range: float | None = 0.1
    rnn_init: str | None = None
    locked_dropout: bool = False
    dropouti: float | None = None
    dropouth: float | None = None
    dropoute: float = 0.0
    weight_dropout: float = 0.0
    major_proportions: list | None = None
    minor_input: str = "embedding"
    mixture_components: Any = None
    dropoutl: float = 0.0
    cv_penalty: float = 0.0
    ar_alpha: float = 0.0
    tar_beta: float = 0.0
    sampled_softmax: int = 0
    sampler_power: float = 1.0
    context: dict | None = None


@dataclasses.dataclass
class TrainConfig:
    """Optimisation and bookkeeping.

    Attributes:
        epochs: number of epochs.
        optimizer: ``sgd`` or ``adam``.
        learning_rate: initial learning rate.
        clipnorm: global-norm gradient clipping (``None``: off).
        weight_decay: L2 penalty coefficient (coupled, as in PyTorch SGD).
        lr_schedule: ``{"name": ..., **params}``; names: ``constant``,
            ``zaremba`` (decay, start_epoch), ``plateau_annealing``
            (Algorithm 1 of the multi-cell LSTM paper), ``divide_on_plateau``
            (pytorch/examples).
        seed: global seed (weights, dropout, variable BPTT).
        out_dir: run directory (logs, checkpoints, config, vocabulary).
        jit_compile: passed to ``model.compile``. ``"auto"`` (default):
            Keras's choice, i.e. a jitted step on JAX and a ``tf.function``
            without XLA on a CPU-only TensorFlow (the recurrent loops are
            XLA-compiled either way). ``False`` on JAX runs every step
            eagerly (slow: the loops recompile per batch).
        dtype_policy: ``float32`` or ``mixed_bfloat16``.
        tensorboard: write TensorBoard logs.
        verbose: Keras progress-bar verbosity.
        nt_asgd_nonmono: if set, NT-ASGD (Merity et al. 2018): switch to
            averaging when the validation loss is worse than the best of
            all but the last ``n`` epochs (AWD/MoS 5, DOC 60).
        nt_asgd_from_start: average from the first step (finetuning).
        stop_on_nonmono: with averaging on, stop when the same condition
            fires on the averaged model (finetuning's stop rule).
        checkpoint_every_minutes: also write a resumable checkpoint in
            the middle of an epoch every this many minutes (``None``: at
            epoch ends only). A run killed at any point then loses at most
            this much work.
        checkpoint_every_steps: the same every this many batches.
    """

    epochs: int = 13
    optimizer: str = "sgd"
    learning_rate: float = 1.0
    clipnorm: float | None = 5.0
    weight_decay: float = 0.0
    lr_schedule: dict = dataclasses.field(
        default_factory=lambda: {"name": "constant"}
    )
    seed: int = 1234
    out_dir: str = "runs/default"
    jit_compile: Any = "auto"
    dtype_policy: str = "float32"
    tensorboard: bool = True
    verbose: Any = "auto"
    nt_asgd_nonmono: int | None = None
    nt_asgd_from_start: bool = False
    stop_on_nonmono: bool = False
    checkpoint_every_minutes: float | None = 20.0
    checkpoint_every_steps: int | None = None


_SECTIONS = {"data": DataConfig, "model": ModelConfig, "train": TrainConfig}


@dataclasses.dataclass
class RunConfig:
    """A whole run: ``name`` plus the three sections."""

    name: str = "run"
    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    train: TrainConfig = dataclasses.field(default_factory=TrainConfig)

    def to_dict(self):
        return dataclasses.asdict(self)

    def to_json(self):
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, d):
        """Builds a config; unknown sections or keys raise ConfigError."""
        if not isinstance(d, dict):
            raise ConfigError(f"A run config must be a dict, got {type(d)}")
        unknown = set(d) - {"name", *_SECTIONS}
        if unknown:
            raise ConfigError(
                f"Unknown config section(s) {sorted(unknown)}; valid: "
                f"{['name', *_SECTIONS]}"
            )
        kwargs = {"name": d.get("name", "run")}
        for section, section_cls in _SECTIONS.items():
            kwargs[section] = _section_from_dict(
                section, section_cls, d.get(section, {})
            )
        return cls(**kwargs)

    def replace(self, **sections):
        """Copy with whole sections or ``name`` replaced."""
        return dataclasses.replace(self, **sections)


def _section_from_dict(section, section_cls, values):
    if isinstance(values, section_cls):
        return values
    fields = {f.name for f in dataclasses.fields(section_cls)}
    unknown = set(values) - fields
    if unknown:
        raise ConfigError(
            f"Unknown key(s) {sorted(unknown)} in config section "
            f"'{section}'; valid keys: {sorted(fields)}"
        )
    return section_cls(**values)


def parse_value(text):
    """Parses an override value: JSON if it parses, else the raw string."""
    try:
        return json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return text


def apply_overrides(config, overrides):
    """Returns a copy of ``config`` with ``section.key=value`` overrides.

    ``value`` is parsed as JSON (``3``, ``0.5``, ``[200, 200]``, ``null``,
    ``true``) and falls back to a string. ``name=...`` sets the run name.
    Unknown sections or keys raise :class:`ConfigError` listing the valid
    ones.
    """
    d = config.to_dict()
    for item in overrides:
        if "=" not in item:
            raise ConfigError(
                f"Override {item!r} is not of the form section.key=value"
            )
        key, text = item.split("=", 1)
        value = parse_value(text)
        if key == "name":
            d["name"] = str(value)
            continue
        if "." not in key:
            raise ConfigError(
                f"Override key {key!r} must be section.key with section in "
                f"{list(_SECTIONS)}"
            )
        section, field = key.split(".", 1)
        if section not in _SECTIONS:
            raise ConfigError(
                f"Unknown config section {section!r} in override {item!r}; "
                f"valid: {list(_SECTIONS)}"
            )
        if "." in field:
            field, sub = field.split(".", 1)
            target = d[section].get(field)
            if not isinstance(target, dict):
                raise ConfigError(f"{section}.{field} is not a dict")
            target[sub] = value
        else:
            if field not in d[section]:
                raise ConfigError(
                    f"Unknown key {field!r} in section {section!r} "
                    f"(override {item!r}); valid keys: "
                    f"{sorted(d[section])}"
                )
            d[section][field] = value
    return RunConfig.from_dict(d)


def load_config(path):
    """Reads a RunConfig from a JSON file (clear error if malformed)."""
    try:
        with open(path) as f:
            d = json.load(f)
    except json.JSONDecodeError as e:
        raise ConfigError(f"Config file {path} is not valid JSON: {e}") from e
    return RunConfig.from_dict(d)


__all__ = [
    "ConfigError",
    "DataConfig",
    "ModelConfig",
    "RunConfig",
    "TrainConfig",
    "apply_overrides",
    "load_config",
    "parse_value",
]
