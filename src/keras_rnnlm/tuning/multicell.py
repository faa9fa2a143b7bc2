"""Keras Tuner search over the multi-cell LSTM's selection module.

:class:`MultiCellHyperModel` searches the number of memory cells per node
(the paper's Table 2 values, 2-50), the selection strategy and, for
``min_max``, the output-gate threshold ``o_thr``, on top of a fixed run
config (data, sizes, optimiser, Algorithm-1 annealing: e.g. a preset of
``recipes/multicell_ptb.py``). Each trial trains with the package's
pieces -- the stateful token stream, state resets, validation perplexity
on a separate evaluation model, the run's learning-rate schedule -- and
reports ``val_ppl`` (the objective, minimised; Keras Tuner keeps each
trial's best epoch).

Training, callbacks and the trial table are
:mod:`keras_rnnlm.tuning.base`'s.
"""

import dataclasses

from keras_rnnlm.layers.multicell_lstm import STRATEGIES
from keras_rnnlm.tuning.base import OBJECTIVE
from keras_rnnlm.tuning.base import RunConfigHyperModel
from keras_rnnlm.tuning.base import trial_table as _trial_table

#: The memory-cell counts of the paper's Table 2.
PAPER_CELLS = (2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 30, 50)
__all__ = [
    "OBJECTIVE",
    "PAPER_CELLS",
    "MultiCellHyperModel",
    "trial_table",
]


class MultiCellHyperModel(RunConfigHyperModel):
    """Hyperparameters: ``num_cells``, ``strategy`` and (``min_max``)
    ``o_thr``.

    Args:
        config: the base :class:`~keras_rnnlm.config.RunConfig`; its model
            section gets ``cell="multicell_lstm"`` and the trial's cell
            arguments (other ``cell_kwargs`` are kept).
        corpus: the loaded corpus (``train``/``valid`` ids, ``vocab``).
        cells: candidate numbers of memory cells.
        strategies: candidate strategies.
        o_thr_range: ``(min, max, step)`` of ``o_thr``.
        **kwargs: :class:`~keras_rnnlm.tuning.base.RunConfigHyperModel`
            knobs (``bptts``, ``learning_rates``) and
            ``keras_tuner.HyperModel`` arguments.
    """

    def __init__(
        self,
        config,
        corpus,
        cells=PAPER_CELLS,
        strategies=STRATEGIES,
        o_thr_range=(0.1, 0.9, 0.1),
        **kwargs,
    ):
        super().__init__(config, corpus, **kwargs)
        unknown = set(strategies) - set(STRATEGIES)
        if unknown:
            raise ValueError(f"Unknown strategies {sorted(unknown)}")
        if not cells or min(cells) < 1:
            raise ValueError(f"cells must be positive integers: {cells}")
        self.cells = tuple(int(c) for c in cells)
        self.strategies = tuple(strategies)
        self.o_thr_range = tuple(o_thr_range)

    def trial_config(self, hp):
        """The run config of the trial's hyperparameter values."""
        kwargs = dict(self.config.model.cell_kwargs)
        kwargs["num_cells"] = hp.Choice("num_cells", self.cells, ordered=True)
        strategy = hp.Choice("strategy", self.strategies)
        kwargs["strategy"] = strategy
        kwargs.pop("output_threshold", None)
        if "min_max" in self.strategies:
            with hp.conditional_scope("strategy", ["min_max"]):
                lo, hi, step = self.o_thr_range
                thr = hp.Float("o_thr", lo, hi, step=step)
            if strategy == "min_max":
                kwargs["output_threshold"] = thr
        model = dataclasses.replace(
            self.config.model, cell="multicell_lstm", cell_kwargs=kwargs
        )
        return self.config.replace(model=model)

    def describe(self, hp):
        values = hp.values
        return {
            "num_cells": values.get("num_cells"),
            "strategy": values.get("strategy"),
            "o_thr": values.get("o_thr")
            if values.get("strategy") == "min_max"
            else None,
            **self.knob_values(hp),
        }


def trial_table(tuner):
    """One row per finished trial: id, hyperparameters, best ``val_ppl``."""
    return _trial_table(tuner, tuner.hypermodel.describe)
