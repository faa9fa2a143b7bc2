"""What every Keras Tuner search of the package shares.

:class:`RunConfigHyperModel` turns a trial's hyperparameters into a run
config (:meth:`~RunConfigHyperModel.trial_config`, per subclass), builds
and compiles the model as the trainer does, and trains a trial with the
package's pieces: the stateful token stream (fixed windows of
``data.bptt``; variable BPTT, NT-ASGD and finetuning are not part of a
trial), state resets, validation perplexity on a separate evaluation
model, and the run's learning-rate schedule. It reports ``val_ppl``
(:data:`OBJECTIVE`, minimised; Keras Tuner keeps each trial's best
epoch).

Callbacks: the package's callbacks of a trial are created inside
:meth:`~RunConfigHyperModel.fit` for every trial, after Keras Tuner's
deep copy of the callbacks given to ``search`` (which therefore never meets
a model or an evaluator); callbacks given to ``search`` run after them,
so they see ``val_ppl``. The package's callbacks hold no model at
construction (:mod:`keras_rnnlm.callbacks.base`), so they may be given to
``search`` as well.

Data parallel: with ``train.distribute = "data_parallel"`` in the base
config (JAX), every trial's model is built, trained and validated under
the trainer's data-parallel ``keras.distribution`` over this process's
devices (:mod:`keras_rnnlm.training.distribute`: the streams split
contiguously, the carried state batch-sharded). Several processes per
trial are refused: each process would run its own oracle and pick its own
trials; Keras Tuner distributes a search across trials instead (one
process per trial, ``KERASTUNER_*`` variables).

The command line of the ``recipes/tune_*.py`` searches is
:mod:`keras_rnnlm.cli.tune`.
"""

import dataclasses
import math

import keras_tuner

from keras_rnnlm.callbacks import ResetStates
from keras_rnnlm.callbacks import make_lr_schedule
from keras_rnnlm.config import ConfigError
from keras_rnnlm.models.pretrained import apply_pretrained_embeddings
from keras_rnnlm.training.distribute import check_divisible
from keras_rnnlm.training.distribute import distribution_scope
from keras_rnnlm.training.distribute import is_distributed
from keras_rnnlm.training.distribute import make_distribution
from keras_rnnlm.training.distribute import process_settings
from keras_rnnlm.training.trainer import make_train_stream
from keras_rnnlm.training.trainer import prepare_model
from keras_rnnlm.training.trainer import validation_callback

OBJECTIVE = keras_tuner.Objective("val_ppl", direction="min")


class RunConfigHyperModel(keras_tuner.HyperModel):
    """A hypermodel over a base run config (subclasses define the space
    in :meth:`trial_config`).

    Two optional knobs every search can add:

    * ``learning_rates``: candidates of ``train.learning_rate``
      (hyperparameter ``learning_rate``, build time: it is compiled in);
    * ``bptts``: candidate training windows, a *fit-time*
      hyperparameter ``bptt`` read in :meth:`fit` (the stateful model takes
      any window; validation keeps ``data.eval_bptt`` when it is set). It
      is declared up front (:meth:`declare_hyperparameters`), so the
      oracle knows it from the first trial (a grid covers it).

    With ``train.distribute = "data_parallel"`` in ``config`` every trial
    is built and fitted under :attr:`distribution` (this process's
    devices; a ConfigError for TensorFlow, for several processes and for
    a trial whose batch does not split over the devices).

    Args:
        config: the base :class:`~keras_rnnlm.config.RunConfig`.
        corpus: the loaded corpus (``train``/``valid`` ids, ``vocab``).
        bptts: candidate training windows (``None``: ``data.bptt``).
        learning_rates: candidate learning rates (``None``: the config's).
        **kwargs: ``keras_tuner.HyperModel`` arguments.
    """

    def __init__(
        self, config, corpus, bptts=None, learning_rates=None, **kwargs
    ):
        super().__init__(**kwargs)
        if bptts is not None and (not bptts or min(bptts) < 1):
            raise ValueError(f"bptts must be positive integers: {bptts}")
        if learning_rates is not None and (
            not learning_rates or min(learning_rates) <= 0
        ):
            raise ValueError(
                f"learning_rates must be positive: {learning_rates}"
            )
        self.config = config
        self.corpus = corpus
        self.distribution = _trial_distribution(config)
        self.trials_run = 0  # fits run by this process
        self.bptts = None if bptts is None else tuple(int(b) for b in bptts)
        self.learning_rates = (
            None
            if learning_rates is None
            else tuple(float(x) for x in learning_rates)
        )

    @property
    def vocab_size(self):
        return len(self.corpus.vocab)

    def trial_config(self, hp):
        """The run config of the trial's model hyperparameters."""
        raise NotImplementedError

    def declare_hyperparameters(self, hp):
        if self.bptts:
            hp.Choice("bptt", self.bptts, ordered=True)

    def run_config(self, hp, fit=False):
        """:meth:`trial_config` with the knobs applied (``fit``: the
        fit-time ones too)."""
        config = self.trial_config(hp)
        if self.learning_rates:
            lr = hp.Choice("learning_rate", self.learning_rates, ordered=True)
            config = config.replace(
                train=dataclasses.replace(config.train, learning_rate=lr)
            )
        if fit and self.bptts:
            bptt = hp.Choice("bptt", self.bptts, ordered=True)
            config = config.replace(
                data=dataclasses.replace(config.data, bptt=bptt)
            )
        return config

    def knob_values(self, hp):
        """Table columns of the knobs in use."""
        out = {}
        if self.learning_rates:
            out["learning_rate"] = hp.values.get("learning_rate")
        if self.bptts:
            out["bptt"] = hp.values.get("bptt")
        return out

    def describe(self, hp):
        """The table columns of a trial (default: its values)."""
        return dict(hp.values)

    def build(self, hp):
        config = self.run_config(hp)
        if self.distribution is not None:
            check_divisible(config, self.distribution.device_mesh.devices.size)
        with distribution_scope(self.distribution):
            model = prepare_model(config, self.corpus)
            # every trial starts from the config's word2vec vectors, if any
            apply_pretrained_embeddings(model, self.corpus.vocab, config.model)
            return model

    def trial_callbacks(self, config):
        """The package's callbacks of one trial (fresh objects, no model
        yet: deep-copyable): the trainer's state reset, validation and
        learning-rate schedule."""
        return [
            ResetStates(),
            validation_callback(config, self.corpus),
            make_lr_schedule(
                config.train.lr_schedule, config.train.learning_rate
            ),
        ]

    def fit(self, hp, model, *args, epochs=None, callbacks=(), **kwargs):
        """Trains one trial (positional data arguments are ignored: the
        data is the hypermodel's corpus) on the trainer's stream, with
        fixed windows of ``data.bptt``."""
        config = self.run_config(hp, fit=True)
        fixed = config.replace(
            data=dataclasses.replace(config.data, variable_bptt=False)
        )
        stream = make_train_stream(fixed, self.corpus)
        cbs = [*self.trial_callbacks(config), *(callbacks or ())]
        self.trials_run += 1
        with distribution_scope(self.distribution):
            return model.fit(
                stream,
                epochs=epochs or config.train.epochs,
                callbacks=cbs,
                shuffle=False,
                verbose=kwargs.get("verbose", config.train.verbose),
            )


MULTI_PROCESS_MESSAGE = (
    "a Keras Tuner search runs train.distribute='data_parallel' over one "
    "process's devices, not {n} processes: each process would run its own "
    "oracle; distribute the search across trials (Keras Tuner's "
    "KERASTUNER_* variables) instead (docs/distributed.md)"
)


def _trial_distribution(config):
    """The data-parallel distribution of a search's trials (``None`` for
    ``train.distribute = "none"``)."""
    if not is_distributed(config.train):
        return None
    _, num_processes, _ = process_settings(config.train)
    if num_processes is not None and num_processes > 1:
        raise ConfigError(MULTI_PROCESS_MESSAGE.format(n=num_processes))
    return make_distribution(config)


def trial_table(tuner, describe=None):
    """One row per trial: id, the hypermodel's columns
    (``describe(hp)``, default ``tuner.hypermodel.describe``), best
    ``val_ppl``, best epoch and status; best first."""
    describe = describe or tuner.hypermodel.describe
    rows = []
    for trial in tuner.oracle.trials.values():
        score = trial.score
        rows.append(
            {
                "trial": trial.trial_id,
                **describe(trial.hyperparameters.copy()),
                "val_ppl": None
                if score is None or not math.isfinite(score)
                else float(score),
                "best_epoch": trial.best_step,
                "status": str(trial.status),
            }
        )
    rows.sort(key=lambda r: (r["val_ppl"] is None, r["val_ppl"] or 0))
    return rows
