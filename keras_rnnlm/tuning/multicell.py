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

The package's callbacks are created inside :meth:`MultiCellHyperModel.fit`
for every trial, never handed to the tuner, so Keras Tuner's deep copy of
the callbacks passed to ``search`` never meets a model or an evaluator.
"""

import dataclasses
import math

import keras
import keras_tuner

from keras_rnnlm.callbacks import ResetStates
from keras_rnnlm.callbacks import Validation
from keras_rnnlm.callbacks import make_lr_schedule
from keras_rnnlm.data.streams import LMSequence
from keras_rnnlm.layers.multicell_lstm import STRATEGIES
from keras_rnnlm.models import build_language_model

#: The memory-cell counts of the paper's Table 2.
PAPER_CELLS = (2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 30, 50)
OBJECTIVE = keras_tuner.Objective("val_ppl", direction="min")


class MultiCellHyperModel(keras_tuner.HyperModel):
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
        **kwargs: ``keras_tuner.HyperModel`` arguments.
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
        super().__init__(**kwargs)
        unknown = set(strategies) - set(STRATEGIES)
        if unknown:
            raise ValueError(f"Unknown strategies {sorted(unknown)}")
        if not cells or min(cells) < 1:
            raise ValueError(f"cells must be positive integers: {cells}")
        self.config = config
        self.corpus = corpus
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

    def build(self, hp):
        from keras_rnnlm.training.trainer import compile_model

        config = self.trial_config(hp)
        keras.utils.set_random_seed(config.train.seed)
        model = build_language_model(
            config.model,
            len(self.corpus.vocab),
            config.data.batch_size,
            seed=config.train.seed,
        )
        return compile_model(
            model, config.train, getattr(self.corpus, "is_char_level", False)
        )

    def fit(self, hp, model, *args, epochs=None, callbacks=(), **kwargs):
        """Trains one trial (positional data arguments are ignored: the
        data is the hypermodel's corpus)."""
        from keras_rnnlm.training.trainer import make_evaluator

        config = self.trial_config(hp)
        d = config.data
        stream = LMSequence(
            self.corpus.train,
            d.batch_size,
            d.bptt,
            seed=config.train.seed,
            pad_to=d.bptt,
        )
        corpus = self.corpus
        cbs = [
            ResetStates(),
            Validation(
                lambda: make_evaluator(
                    config, corpus, d.eval_batch_size or d.batch_size
                ),
                corpus.valid,
            ),
            make_lr_schedule(
                config.train.lr_schedule, config.train.learning_rate
            ),
            *(callbacks or ()),
        ]
        return model.fit(
            stream,
            epochs=epochs or config.train.epochs,
            callbacks=cbs,
            shuffle=False,
            verbose=kwargs.get("verbose", config.train.verbose),
        )


def trial_table(tuner):
    """One row per finished trial: id, hyperparameters, best ``val_ppl``."""
    rows = []
    for trial in tuner.oracle.trials.values():
        values = trial.hyperparameters.values
        score = trial.score
        rows.append(
            {
                "trial": trial.trial_id,
                "num_cells": values.get("num_cells"),
                "strategy": values.get("strategy"),
                "o_thr": values.get("o_thr")
                if values.get("strategy") == "min_max"
                else None,
                "val_ppl": None
                if score is None or not math.isfinite(score)
                else float(score),
                "best_epoch": trial.best_step,
                "status": str(trial.status),
            }
        )
    rows.sort(key=lambda r: (r["val_ppl"] is None, r["val_ppl"] or 0))
    return rows
