"""Keras Tuner searches of the Major-Minor LSTM paper (Shuang et al.,
"Major-Minor Long Short-Term Memory for Word-Level Language Model", IEEE
TNNLS 31(10), 2020, doi:10.1109/TNNLS.2019.2947563).

:class:`MajorMinorHyperModel` (Sec. V-A, V-D2, Table IX, Fig. 6)
    Replaces the base config's LSTM layers by Major-Minor LSTM layers and
    searches the Major proportion of each layer (the paper "divided the
    dimension of each MMLSTMs layer output into 10 parts" and searched the
    proportions by hand: deciles 0.5-1.0 here, 1.0 being a plain LSTM
    layer), one shared proportion (Table IX's 5:5 ... 10:0), optionally
    layer sizes, and optionally *solves* the total size of some layers so
    that the parameter count stays at a budget, as Table IX does: there,
    for every ratio, the first two layers share one size such that the
    model has the AWD-LSTM's ~24.2M parameters, and the last layer keeps
    the embedding size of the tied decoder. (Solved layers keep their
    base size ratios: equal layers stay equal.)
    :func:`keras_rnnlm.models.params.solve_sizes` does this with the
    closed-form count of the builder's model (sizes rounded to
    ``size_step``); with the AWD-LSTM PTB preset as budget it gives
    exactly Table IX's PTB sizes (1560, 1500, 1420, 1330, 1240, 1150).

:class:`HiddenSizeHyperModel` (Sec. III, Figs. 3 and 4)
    Searches the hidden size of chosen layers of a plain (AWD-)LSTM model,
    the others kept at their standard size ``c``: Fig. 3's sizes 200-1200
    (:data:`FIG3_SIZES`) or Fig. 4's 0.6c-1.2c (:data:`FIG4_FACTORS`).
    The paper varies one layer at a time; a grid search with one layer
    reproduces one curve.

Both train every trial as :class:`~keras_rnnlm.tuning.base.
RunConfigHyperModel` does (objective: validation perplexity) and accept
its knobs: ``learning_rates`` (build time) and ``bptts`` (a fit-time
hyperparameter read in ``fit``). Layers are numbered from 1 in
hyperparameter names and arguments, as in the paper (LSTM-1, LSTM-2...).
"""

import dataclasses

from keras_rnnlm.models.params import count_params
from keras_rnnlm.models.params import solve_sizes
from keras_rnnlm.tuning.base import OBJECTIVE
from keras_rnnlm.tuning.base import RunConfigHyperModel
from keras_rnnlm.tuning.base import trial_table

#: Major proportions searched by default (tenths of the layer, >= half).
DECILES = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
#: Fig. 3: hidden sizes 200-1200 at intervals of 200.
FIG3_SIZES = (200, 400, 600, 800, 1000, 1200)
#: Fig. 4: hidden sizes 0.6c-1.2c at intervals of 0.1c.
FIG4_FACTORS = (0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2)
BUDGET_BASE = "base"

__all__ = [
    "BUDGET_BASE",
    "DECILES",
    "FIG3_SIZES",
    "FIG4_FACTORS",
    "OBJECTIVE",
    "HiddenSizeHyperModel",
    "MajorMinorHyperModel",
    "trial_table",
]


def _layer_numbers(layers, n_layers, what):
    layers = tuple(int(i) for i in layers)
    bad = [i for i in layers if not 1 <= i <= n_layers]
    if bad or len(set(layers)) != len(layers):
        raise ValueError(
            f"{what}: layer numbers must be distinct and in 1..{n_layers}, "
            f"got {list(layers)}"
        )
    return layers


def _size_choices(choices, layers):
    """``{layer: candidates}`` from a dict or one list for ``layers``."""
    if choices is None:
        return {}
    if not isinstance(choices, dict):
        choices = {layer: choices for layer in layers}
    out = {}
    for layer, values in choices.items():
        values = tuple(sorted({int(v) for v in values}))
        if not values or values[0] < 1:
            raise ValueError(f"Sizes of layer {layer} must be positive")
        out[int(layer)] = values
    return out


def _sizes_text(sizes):
    return "/".join(str(s) for s in sizes)


class _SizesMixin:
    """Size hyperparameters ``size_N`` of a :class:`RunConfigHyperModel`."""

    def _check_tied(self, layers):
        n = len(self.config.model.hidden_sizes)
        if self.config.model.head == "tied" and n in layers:
            raise ValueError(
                f"Layer {n} feeds the tied decoder: its size must stay "
                f"model.embedding_dim ({self.config.model.embedding_dim})"
            )

    def _apply_sizes(self, hp, sizes):
        sizes = list(sizes)
        for layer, values in self.size_choices.items():
            sizes[layer - 1] = hp.Choice(f"size_{layer}", values, ordered=True)
        return sizes

    def _describe_model(self, model):
        return {
            "hidden_sizes": _sizes_text(model.hidden_sizes),
            "params": count_params(model, self.vocab_size),
        }


class MajorMinorHyperModel(_SizesMixin, RunConfigHyperModel):
    """Major proportions (and sizes) of a Major-Minor LSTM stack.

    Hyperparameters: ``major_proportion_N`` for each searched layer ``N``
    (or one ``major_proportion`` with ``shared_proportion``), ``size_N``
    for the layers of ``size_choices``, and the knobs.

    Args:
        config: the base run config: an MMLSTM (``cell="mmlstm"``, e.g. a
            ``recipes/mmlstm_ptb.py`` preset) or a plain LSTM one (e.g. an
            AWD-LSTM preset; its layers become MMLSTM layers, proportion
            1.0 until searched). Minor input, dropouts, weight drop, head
            and training settings are kept.
        corpus: the loaded corpus.
        proportions: candidate Major proportions, each in (0, 1].
        layers: layers (1-based) whose proportion is searched (default:
            all); the others keep the base proportion.
        shared_proportion: one proportion for all ``layers`` (Table IX).
        size_choices: candidate total sizes: ``{layer: [sizes]}``, or one
            list for every layer that is not in ``solve_layers`` and does
            not feed a tied decoder.
        param_budget: ``None`` (sizes as given), an int, or ``"base"``:
            the parameter count of the base config itself (with its base
            proportions). With a budget, the ``solve_layers`` are scaled
            together (keeping their base size ratios, multiples of
            ``size_step``) to the trial's model closest to it
            (:func:`~keras_rnnlm.models.params.solve_sizes`).
        solve_layers: layers (1-based) to resize (default: every layer
            that is not in ``size_choices`` and does not feed a tied
            decoder).
        size_step: solved sizes are multiples of this (Table IX: 10).
        **kwargs: :class:`~keras_rnnlm.tuning.base.RunConfigHyperModel`
            knobs (``bptts``, ``learning_rates``) and
            ``keras_tuner.HyperModel`` arguments.
    """

    def __init__(
        self,
        config,
        corpus,
        proportions=DECILES,
        layers=None,
        shared_proportion=False,
        size_choices=None,
        param_budget=None,
        solve_layers=None,
        size_step=10,
        **kwargs,
    ):
        super().__init__(config, corpus, **kwargs)
        model = config.model
        if model.cell not in ("lstm", "mmlstm"):
            raise ValueError(
                "MajorMinorHyperModel replaces LSTM layers: the base "
                f"config's cell must be 'lstm' or 'mmlstm', got {model.cell!r}"
            )
        n = len(model.hidden_sizes)
        proportions = tuple(sorted({float(r) for r in proportions}))
        if not proportions or not all(0.0 < r <= 1.0 for r in proportions):
            raise ValueError(f"Proportions must be in (0, 1]: {proportions}")
        self.proportions = proportions
        self.layers = _layer_numbers(
            range(1, n + 1) if layers is None else layers, n, "layers"
        )
        self.shared_proportion = bool(shared_proportion)
        free = [i for i in range(1, n + 1)]
        if model.head == "tied":
            free.remove(n)
        if solve_layers and param_budget is None:
            raise ValueError("solve_layers needs a param_budget")
        if (
            param_budget is not None
            and solve_layers is None
            and size_choices is not None
            and not isinstance(size_choices, dict)
        ):
            raise ValueError(
                "With a parameter budget, give size_choices per layer "
                "({layer: sizes}) or name the solve_layers"
            )
        self.size_choices = _size_choices(
            size_choices, [i for i in free if i not in (solve_layers or ())]
        )
        self._check_tied(self.size_choices)
        self.size_step = int(size_step)
        self.base_proportions = list(
            model.major_proportions
            if model.cell == "mmlstm"
            else [1.0] * len(model.hidden_sizes)
        )
        self.param_budget = None
        self.solve_layers = ()
        if param_budget is not None:
            if param_budget == BUDGET_BASE:
                base = self._mmlstm_model(
                    model.hidden_sizes, self.base_proportions
                )
                param_budget = count_params(base, self.vocab_size)
            self.param_budget = int(param_budget)
            if solve_layers is None:
                solve_layers = [i for i in free if i not in self.size_choices]
            self.solve_layers = _layer_numbers(solve_layers, n, "solve_layers")
            if not self.solve_layers:
                raise ValueError("A parameter budget needs a layer to solve")
            clash = set(self.solve_layers) & set(self.size_choices)
            if clash:
                raise ValueError(
                    f"Layers {sorted(clash)} are both searched and solved"
                )
            self._check_tied(self.solve_layers)

    def _mmlstm_model(self, sizes, proportions):
        return dataclasses.replace(
            self.config.model,
            cell="mmlstm",
            hidden_sizes=list(sizes),
            major_proportions=list(proportions),
        )

    def trial_config(self, hp):
        props = list(self.base_proportions)
        if self.shared_proportion:
            r = hp.Choice("major_proportion", self.proportions, ordered=True)
            for layer in self.layers:
                props[layer - 1] = r
        else:
            for layer in self.layers:
                props[layer - 1] = hp.Choice(
                    f"major_proportion_{layer}", self.proportions, ordered=True
                )
        sizes = self._apply_sizes(hp, self.config.model.hidden_sizes)
        model = self._mmlstm_model(sizes, props)
        if self.param_budget is not None:
            model = solve_sizes(
                model,
                self.vocab_size,
                self.param_budget,
                [i - 1 for i in self.solve_layers],
                step=self.size_step,
            )
        return self.config.replace(model=model)

    def describe(self, hp):
        model = self.run_config(hp).model
        out = {
            f"major_proportion_{i + 1}": r
            for i, r in enumerate(model.major_proportions)
        }
        return {**out, **self._describe_model(model), **self.knob_values(hp)}


class HiddenSizeHyperModel(_SizesMixin, RunConfigHyperModel):
    """Hidden sizes of chosen layers of a (plain) recurrent stack.

    Hyperparameters: ``size_N`` for each layer ``N`` of ``layers``, and
    the knobs.

    Args:
        config: the base run config (any cell; e.g. the AWD-LSTM or
            AWD-LSTM-MoS preset, whose sizes are the standard ``c``).
        corpus: the loaded corpus.
        layers: layers (1-based) to resize (default: the first; a tied
            decoder's layer cannot be resized).
        sizes: candidate sizes (default Fig. 3's 200-1200), or
        factors: candidate multiples of each layer's base size ``c``
            (Fig. 4: :data:`FIG4_FACTORS`), rounded to integers; overrides
            ``sizes``.
        **kwargs: knobs and ``keras_tuner.HyperModel`` arguments.
    """

    def __init__(
        self,
        config,
        corpus,
        layers=(1,),
        sizes=FIG3_SIZES,
        factors=None,
        **kwargs,
    ):
        super().__init__(config, corpus, **kwargs)
        base = config.model.hidden_sizes
        layers = _layer_numbers(layers, len(base), "layers")
        if not layers:
            raise ValueError("HiddenSizeHyperModel needs a layer to resize")
        if factors is not None:
            if min(factors) <= 0:
                raise ValueError(f"factors must be positive: {factors}")
            choices = {
                i: [max(1, round(f * base[i - 1])) for f in factors]
                for i in layers
            }
        else:
            choices = {i: sizes for i in layers}
        self.size_choices = _size_choices(choices, layers)
        self._check_tied(self.size_choices)

    def trial_config(self, hp):
        sizes = self._apply_sizes(hp, self.config.model.hidden_sizes)
        model = dataclasses.replace(self.config.model, hidden_sizes=sizes)
        return self.config.replace(model=model)

    def describe(self, hp):
        model = self.run_config(hp).model
        out = {
            f"size_{i}": hp.values.get(f"size_{i}") for i in self.size_choices
        }
        return {**out, **self._describe_model(model), **self.knob_values(hp)}
