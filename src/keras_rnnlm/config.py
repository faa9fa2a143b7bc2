"""Run configuration: plain dataclasses, validated, with dotted overrides.

A run is described by a :class:`RunConfig` with three sections, ``data``,
``model`` and ``train``. Configs round-trip through JSON (``to_dict`` /
``from_dict``); unknown keys are errors everywhere (a typo in a recipe or a
``--set`` override must never be silently ignored).
"""

import dataclasses
import json
import math
import numbers
from typing import Any


class ConfigError(ValueError):
    """An invalid configuration key or value.

    ``key``: the dotted key at fault (``"model.cell"``), where there is
    one; the message then starts with it, so that a command line can put
    the option that set it in front (``--set model.cell: ...``).
    """

    def __init__(self, message, key=None):
        super().__init__(message)
        self.key = key


def given_by(key, keys):
    """Whether config key ``key`` was set by one of the dotted ``keys``:
    the same key, a key inside it (``train.lr_schedule.decay`` in
    ``train.lr_schedule``) or a key holding it."""
    if key is None:
        return False
    return any(
        key == k or key.startswith(k + ".") or k.startswith(key + ".")
        for k in keys
    )


def override_keys(overrides):
    """The dotted keys of ``section.key=value`` overrides."""
    return [item.split("=", 1)[0].strip() for item in overrides]


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
        state_reset: ``epoch`` (the recurrent state is carried along the
            stream and reset at each epoch start: discourse-level
            training) or ``sentence`` (also reset at every sentence start,
            in training and evaluation: sentence-level training; see
            :mod:`keras_rnnlm.data.sentences` for what a sentence is).
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
    state_reset: str = "epoch"

    def __post_init__(self):
        _check_fields(self)


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
        pretrained_embeddings: ``None`` (random init) or ``{"path": FILE,
            "binary": None | bool, "cbow": bool}``: a fresh run starts
            with the input embedding (and, with ``"cbow": true``, the
            CBOW context table) read from a word2vec file through
            gensim's ``KeyedVectors`` (``binary``: the binary format;
            ``None``: binary for a ``.bin`` name, else text). Words
            missing from the file keep their random init
            (:mod:`keras_rnnlm.models.pretrained`); a resumed run takes
            its weights from the checkpoint.
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
    pretrained_embeddings: dict | None = None

    def __post_init__(self):
        _check_fields(self)


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
            XLA-compiled either way); the evaluators' models on TensorFlow
            XLA-compile their whole step for batches of 1 to 3 and for
            large steps in long windows
            (:func:`keras_rnnlm.evaluation.static.eval_jit_compile`).
            ``False`` on JAX runs every step eagerly (slow: the loops
            recompile per batch).
        dtype_policy: ``float32`` or ``mixed_bfloat16``.
        tensorboard: write TensorBoard logs.
        timing_log: write ``timing.csv`` into the run directory: when each
            training batch ended and its tokens, and when each epoch's end
            (validation, checkpoints) was done
            (:class:`~keras_rnnlm.callbacks.timing.TimingLog`).
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
        distribute: ``none`` (one device) or ``data_parallel``: the
            streams split over every device through
            ``keras.distribution`` (JAX backend only;
            :mod:`keras_rnnlm.training.distribute`).
        distribute_coordinator: with several processes, process 0's
            ``host:port`` (else ``$KERAS_DISTRIBUTION_JOB_ADDRESSES``).
        distribute_num_processes: the number of processes (else
            ``$KERAS_DISTRIBUTION_NUM_PROCESSES``; ``None``: one).
        distribute_process_id: this process's index (else
            ``$KERAS_DISTRIBUTION_PROCESS_ID``); 0 writes the run.
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
    timing_log: bool = False
    verbose: Any = "auto"
    nt_asgd_nonmono: int | None = None
    nt_asgd_from_start: bool = False
    stop_on_nonmono: bool = False
    checkpoint_every_minutes: float | None = 20.0
    checkpoint_every_steps: int | None = None
    distribute: str = "none"
    distribute_coordinator: str | None = None
    distribute_num_processes: int | None = None
    distribute_process_id: int | None = None

    def __post_init__(self):
        _check_fields(self)


_SECTIONS = {"data": DataConfig, "model": ModelConfig, "train": TrainConfig}


# -- typed, range-checked fields ---------------------------------------------
#
# Every field of every section has a check, run when the section is built
# (``from_dict``, ``--set`` overrides, JSON configs, recipe presets, direct
# construction): a wrong type or a value out of range is a ConfigError that
# names the key and what it expects, before anything is written. Checks
# that involve several fields (a tied head's sizes, a head's mixture) stay
# with the builder (:func:`keras_rnnlm.models.validate_model_config`).


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_real(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


class _Int:
    def __init__(self, lo=None, hi=None):
        self.lo, self.hi = lo, hi
        bounds = [f">= {lo}" if lo is not None else None]
        bounds.append(f"< {hi}" if hi is not None else None)
        self.expects = " ".join(["an int", *filter(None, bounds)])

    def ok(self, v):
        return (
            _is_int(v)
            and (self.lo is None or v >= self.lo)
            and (self.hi is None or v < self.hi)
        )


class _Float:
    """A finite number in a range (``lo``/``hi`` bounds; ``lo_open`` and
    ``hi_open`` exclude them)."""

    def __init__(self, lo=None, hi=None, lo_open=False, hi_open=False):
        self.lo, self.hi, self.lo_open, self.hi_open = lo, hi, lo_open, hi_open
        if lo is not None and hi is not None:
            left = "(" if lo_open else "["
            right = ")" if hi_open else "]"
            self.expects = f"a number in {left}{lo}, {hi}{right}"
        elif lo is not None:
            self.expects = f"a number {'>' if lo_open else '>='} {lo}"
        else:
            self.expects = "a finite number"

    def ok(self, v):
        if not _is_real(v) or not math.isfinite(v):
            return False
        if self.lo is not None and (
            v <= self.lo if self.lo_open else v < self.lo
        ):
            return False
        if self.hi is not None and (
            v >= self.hi if self.hi_open else v > self.hi
        ):
            return False
        return True


class _Bool:
    expects = "true or false"

    def ok(self, v):
        return isinstance(v, bool)


class _Str:
    def __init__(self, choices=None):
        self.choices = choices
        self.expects = (
            f"one of {list(choices)}" if choices else "a non-empty string"
        )

    def ok(self, v):
        if not isinstance(v, str):
            return False
        return v in self.choices if self.choices else bool(v)


class _Const:
    def __init__(self, value):
        self.value = value
        self.expects = json.dumps(value)

    def ok(self, v):
        return isinstance(v, type(self.value)) and v == self.value


class _CellObject:
    """From Python, ``model.cell`` may also be a Keras RNN cell class or
    instance (not JSON: such a config is not saved)."""

    expects = "a recurrent layer name (or, from Python, a Keras RNN cell)"

    def ok(self, v):
        if isinstance(v, str):
            return bool(v)
        return not isinstance(
            v, (numbers.Number, list, tuple, dict, type(None))
        )


class _Dict:
    expects = "a JSON object"

    def ok(self, v):
        return isinstance(v, dict) and all(isinstance(k, str) for k in v)


class _List:
    def __init__(self, item, min_len=0):
        self.item, self.min_len = item, min_len
        kind = "a non-empty list" if min_len else "a list"
        self.expects = f"{kind} of items, each {item.expects}"

    def ok(self, v):
        return (
            isinstance(v, (list, tuple))
            and len(v) >= self.min_len
            and all(self.item.ok(x) for x in v)
        )


class _Either:
    def __init__(self, *options):
        self.options = options
        self.expects = " or ".join(o.expects for o in options)

    def ok(self, v):
        return any(o.ok(v) for o in self.options)


class _None:
    expects = "null"

    def ok(self, v):
        return v is None


def _optional(check):
    return _Either(_None(), check)


_SIZE = _Int(lo=1)
_RATE = _Float(lo=0, hi=1, hi_open=True)
_NONNEG = _Float(lo=0)
_POSITIVE = _Float(lo=0, lo_open=True)

FIELD_CHECKS = {
    "data": {
        "corpus": _Str(),
        "data_dir": _optional(_Str()),
        "level": _optional(_Str(("word", "char"))),
        "batch_size": _SIZE,
        "bptt": _SIZE,
        "variable_bptt": _Bool(),
        "eval_batch_size": _optional(_SIZE),
        "test_batch_size": _SIZE,
        "eval_bptt": _optional(_SIZE),
        "max_tokens": _optional(_Int(lo=2)),
        "max_train_tokens": _optional(_Int(lo=2)),
        "bptt_max_delta": _optional(_Int(lo=0)),
        "bptt_multiple": _SIZE,
        "state_reset": _Str(("epoch", "sentence")),
    },
    "model": {
        "embedding_dim": _SIZE,
        "input_encoding": _Str(),
        "hidden_sizes": _List(_SIZE, min_len=1),
        "cell": _CellObject(),
        "cell_kwargs": _Dict(),
        "head": _Str(),
        "dropout": _RATE,
        "init_range": _optional(_POSITIVE),
        "rnn_init": _optional(_Str()),
        "locked_dropout": _Bool(),
        "dropouti": _optional(_RATE),
        "dropouth": _optional(_RATE),
        "dropoute": _RATE,
        "weight_dropout": _RATE,
        "major_proportions": _optional(
            _List(_Float(lo=0, hi=1, lo_open=True), min_len=1)
        ),
        "minor_input": _Str(),
        "mixture_components": _optional(
            _Either(_SIZE, _List(_Int(lo=0), min_len=1))
        ),
        "dropoutl": _RATE,
        "cv_penalty": _NONNEG,
        "ar_alpha": _NONNEG,
        "tar_beta": _NONNEG,
        "sampled_softmax": _Int(lo=0),
        "sampler_power": _NONNEG,
        "context": _optional(_Dict()),
        "pretrained_embeddings": _optional(_Dict()),
    },
    "train": {
        "epochs": _SIZE,
        "optimizer": _Str(("sgd", "adam")),
        "learning_rate": _NONNEG,
        "clipnorm": _optional(_POSITIVE),
        "weight_decay": _NONNEG,
        "lr_schedule": _Dict(),
        "seed": _Int(lo=0, hi=2**32),
        "out_dir": _Str(),
        "jit_compile": _Either(_Bool(), _Const("auto")),
        "dtype_policy": _Str(
            (
                "float32",
                "float16",
                "bfloat16",
                "float64",
                "mixed_float16",
                "mixed_bfloat16",
            )
        ),
        "tensorboard": _Bool(),
        "timing_log": _Bool(),
        "verbose": _Either(_Const("auto"), _Int(lo=0, hi=3)),
        "nt_asgd_nonmono": _optional(_Int(lo=0)),
        "nt_asgd_from_start": _Bool(),
        "stop_on_nonmono": _Bool(),
        "checkpoint_every_minutes": _optional(_POSITIVE),
        "checkpoint_every_steps": _optional(_SIZE),
        "distribute": _Str(("none", "data_parallel")),
        "distribute_coordinator": _optional(_Str()),
        "distribute_num_processes": _optional(_SIZE),
        "distribute_process_id": _optional(_Int(lo=0)),
    },
}

# ``train.lr_schedule``: ``{"name": NAME, **params}``; each schedule's
# parameters (:mod:`keras_rnnlm.callbacks.lr_schedules`) and whether they
# are required.
LR_SCHEDULE_PARAMS = {
    "constant": {},
    "zaremba": {"decay": (_POSITIVE, True), "start_epoch": (_Int(lo=0), True)},
    "plateau_annealing": {
        "decay": (_Float(lo=0, hi=1, lo_open=True), False),
        "epochs_to_wait": (_Int(lo=0), False),
        "min_reduction": (_NONNEG, False),
        "min_lr": (_NONNEG, False),
        "monitor": (_Str(), False),
    },
    "divide_on_plateau": {
        "factor": (_Float(lo=1, lo_open=True), False),
        "monitor": (_Str(), False),
    },
}


# ``model.pretrained_embeddings``: each key's check and whether it is
# required (:mod:`keras_rnnlm.models.pretrained`).
PRETRAINED_EMBEDDING_KEYS = {
    "path": (_Str(), True),
    "binary": (_optional(_Bool()), False),
    "cbow": (_Bool(), False),
}


def _describe(value):
    return f"{value!r} ({type(value).__name__})"


def _check_fields(section_config):
    section = _SECTION_NAMES[type(section_config)]
    for key, check in FIELD_CHECKS[section].items():
        value = getattr(section_config, key)
        if not check.ok(value):
            raise ConfigError(
                f"{section}.{key} must be {check.expects}, got "
                f"{_describe(value)}",
                key=f"{section}.{key}",
            )
    if section == "train":
        _check_lr_schedule(section_config.lr_schedule)
    if section == "model" and section_config.pretrained_embeddings is not None:
        _check_pretrained_embeddings(section_config.pretrained_embeddings)


def _check_lr_schedule(spec):
    name = spec.get("name", "constant")
    if not isinstance(name, str) or name not in LR_SCHEDULE_PARAMS:
        raise ConfigError(
            f"train.lr_schedule.name must be one of "
            f"{sorted(LR_SCHEDULE_PARAMS)}, got {_describe(name)}",
            key="train.lr_schedule.name",
        )
    params = LR_SCHEDULE_PARAMS[name]
    _check_spec(
        spec, params, "train.lr_schedule", f"train.lr_schedule {name!r}"
    )


def _check_pretrained_embeddings(spec):
    _check_spec(
        spec,
        PRETRAINED_EMBEDDING_KEYS,
        "model.pretrained_embeddings",
        "model.pretrained_embeddings",
        extra=(),
    )


def _check_spec(spec, params, path, label, extra=("name",)):
    """A dict-valued option ``spec`` at ``path`` (``label`` in messages)
    against ``params`` ``{key: (check, required)}``: no unknown keys
    (``extra`` are allowed too), the required ones present, each value
    passing its check; else a ConfigError."""
    unknown = sorted(set(spec) - {*extra, *params})
    if unknown:
        raise ConfigError(
            f"Unknown key(s) {unknown} in {label}; "
            f"valid keys: {sorted([*extra, *params])}",
            key=path,
        )
    for key, (check, required) in params.items():
        if key not in spec:
            if required:
                raise ConfigError(
                    f"{label} needs {path}.{key} ({check.expects})",
                    key=path,
                )
            continue
        if not check.ok(spec[key]):
            raise ConfigError(
                f"{path}.{key} must be {check.expects}, got "
                f"{_describe(spec[key])}",
                key=f"{path}.{key}",
            )


_SECTION_NAMES = {cls: name for name, cls in _SECTIONS.items()}


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
        name = d.get("name", "run")
        if not isinstance(name, str):
            raise ConfigError(f"name must be a string, got {_describe(name)}")
        kwargs = {"name": name}
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
    if not isinstance(values, dict):
        raise ConfigError(
            f"Config section '{section}' must be a JSON object, got "
            f"{_describe(values)}"
        )
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
    "given_by",
    "load_config",
    "override_keys",
    "parse_value",
]
