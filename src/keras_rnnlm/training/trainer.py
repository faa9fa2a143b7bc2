"""The one trainer: ``model.fit`` on a stateful token stream + callbacks.

Every model family of the package trains through :func:`train`; what
differs between papers is the model config (layers, head), the callbacks
(schedules, averaging) and, later, model losses (AR/TAR) -- never the loop.
"""

import contextlib
import json
import os
import shutil
import signal

import keras

from keras_rnnlm.callbacks import BestCheckpoint
from keras_rnnlm.callbacks import EpochLog
from keras_rnnlm.callbacks import LearningCurve
from keras_rnnlm.callbacks import NaNGuard
from keras_rnnlm.callbacks import ResetStates
from keras_rnnlm.callbacks import RunMetadata
from keras_rnnlm.callbacks import RunProgbar
from keras_rnnlm.callbacks import StopOnSignal
from keras_rnnlm.callbacks import TrainingCheckpoint
from keras_rnnlm.callbacks import TrainingDivergedError
from keras_rnnlm.callbacks import TrainingInterrupted
from keras_rnnlm.callbacks import Validation
from keras_rnnlm.callbacks import make_lr_schedule
from keras_rnnlm.callbacks.bptt_lr import SequenceLengthLRScale
from keras_rnnlm.callbacks.checkpoint import checkpoint_history
from keras_rnnlm.callbacks.checkpoint import saved_progress
from keras_rnnlm.callbacks.checkpoint import tidy_checkpoints
from keras_rnnlm.callbacks.interrupt import can_handle_signals
from keras_rnnlm.callbacks.interrupt import interrupted_at
from keras_rnnlm.callbacks.logging import write_epoch_log
from keras_rnnlm.callbacks.nt_asgd import NTASGD
from keras_rnnlm.callbacks.nt_asgd import nonmono_interval
from keras_rnnlm.callbacks.regularization import RegularizerLogger
from keras_rnnlm.callbacks.timing import TimingLog
from keras_rnnlm.config import ConfigError
from keras_rnnlm.config import load_config
from keras_rnnlm.data.corpus import check_corpus_fits
from keras_rnnlm.data.documents import corpus_idf
from keras_rnnlm.data.fit_data import fit_data
from keras_rnnlm.data.sentences import lm_sequence
from keras_rnnlm.evaluation.static import evaluate_run
from keras_rnnlm.evaluation.static import make_evaluator
from keras_rnnlm.metrics import TokenCrossEntropy
from keras_rnnlm.metrics import lm_metrics
from keras_rnnlm.models import build_language_model
from keras_rnnlm.models import validate_model_config
from keras_rnnlm.models.context import idf_layers
from keras_rnnlm.models.context import set_context_idf
from keras_rnnlm.models.pretrained import apply_pretrained_embeddings
from keras_rnnlm.models.pretrained import describe as describe_pretrained
from keras_rnnlm.models.samplers import has_targets_input
from keras_rnnlm.models.samplers import set_sampler_counts
from keras_rnnlm.models.weights import model_parameters
from keras_rnnlm.optimizers import SGD
from keras_rnnlm.runs import CHECKPOINT_DIR
from keras_rnnlm.runs import CONFIG_FILE
from keras_rnnlm.runs import LOG_FILE
from keras_rnnlm.runs import RESULTS_FILE
from keras_rnnlm.runs import TENSORBOARD_DIR
from keras_rnnlm.runs import TIMING_FILE
from keras_rnnlm.runs import VOCAB_FILE
from keras_rnnlm.runs import atomic_write_text
from keras_rnnlm.runs import is_writer
from keras_rnnlm.runs import load_run_corpus
from keras_rnnlm.runs import run_lock
from keras_rnnlm.runs import run_sentence_starts
from keras_rnnlm.training.distribute import barrier
from keras_rnnlm.training.distribute import distribution_scope
from keras_rnnlm.training.distribute import make_distribution
from keras_rnnlm.training.distribute import shards_evenly

OPTIMIZERS = ("sgd", "adam")


def make_optimizer(train_config):
    """SGD (the package's :class:`keras_rnnlm.optimizers.SGD`: the dense
    gradient's norm, one fused update kernel per variable on TensorFlow)
    or Adam, with global-norm clipping and L2 weight decay.

    For plain SGD, Keras's ``weight_decay`` (``w -= lr * wd * w`` after the
    clipped gradient step) is exactly PyTorch's coupled L2 in
    ``torch.optim.SGD`` as used by the reference code (clipping sees the
    loss gradient only in both).
    """
    kw = {"learning_rate": float(train_config.learning_rate)}
    if train_config.clipnorm:
        kw["global_clipnorm"] = train_config.clipnorm
    if train_config.weight_decay:
        kw["weight_decay"] = train_config.weight_decay
    if train_config.optimizer == "sgd":
        return SGD(**kw)
    if train_config.optimizer == "adam":
        return keras.optimizers.Adam(**kw)
    raise ConfigError(
        f"train.optimizer must be one of {OPTIMIZERS}, got "
        f"{train_config.optimizer!r}"
    )


def compile_model(model, train_config, char_level=False):
    """Compiles with the package's loss and exact token metrics.

    A sampled-softmax training model (a ``targets`` input) reports its
    training metrics as ``sampled_nll`` / ``sampled_ppl``: over the
    sampled candidates, not the vocabulary (validation is full).
    """
    prefix = "sampled_" if has_targets_input(model) else ""
    model.compile(
        optimizer=make_optimizer(train_config),
        loss=TokenCrossEntropy(),
        weighted_metrics=lm_metrics(char_level, prefix=prefix),
        jit_compile=train_config.jit_compile,
    )
    return model


def prepare_run(config):
    """Loads the corpus, checks that every split feeds the run's streams
    (before a batch is trained), and builds the compiled training model."""
    corpus = load_run_corpus(config)
    check_corpus_fits(corpus, config.data)
    return corpus, prepare_model(config, corpus)


def prepare_model(config, corpus):
    """Seeds, sets the dtype policy, builds and compiles the training
    model of ``config`` on a loaded corpus (runs and tuner trials)."""
    validate_model_config(config.model)
    keras.config.set_dtype_policy(config.train.dtype_policy)
    keras.utils.set_random_seed(config.train.seed)
    model = build_training_model(config, corpus)
    return compile_model(model, config.train, corpus.is_char_level)


def validation_callback(config, corpus):
    """Validation perplexity of a run on a separate evaluation model
    (``data.eval_batch_size`` streams, built on first use)."""
    d = config.data
    return Validation(
        lambda: make_evaluator(
            config, corpus, d.eval_batch_size or d.batch_size
        ),
        corpus.valid,
    )


def build_training_model(config, corpus):
    """The stateful training model of a run: with
    ``model.sampled_softmax`` it takes the targets too, and its candidate
    sampler is set from the training counts; an IDF-weighted
    ``model.context`` gets the training split's IDF
    (:func:`~keras_rnnlm.data.documents.corpus_idf`)."""
    model = build_language_model(
        config.model,
        len(corpus.vocab),
        config.data.batch_size,
        seed=config.train.seed,
        targets_input=True,
        reset_input=config.data.state_reset == "sentence",
    )
    set_sampler_counts(model, corpus.train)
    if idf_layers(model):
        set_context_idf(model, corpus_idf(corpus))
    return model


def make_train_stream(config, corpus):
    """The training ``LMSequence`` of a run (fixed or variable windows).

    Variable BPTT keeps the exact window lengths (no padding, so the
    carried state is exact); the number of distinct traced shapes is
    bounded by ``data.bptt_max_delta`` (lengths clipped at ``bptt +
    delta``) and ``data.bptt_multiple`` (lengths rounded to a multiple).
    """
    d = config.data
    max_len = None
    sampled = bool(config.model.sampled_softmax)
    if d.variable_bptt and d.bptt_max_delta is not None:
        max_len = d.bptt + d.bptt_max_delta
    starts = run_sentence_starts(config, corpus)
    return lm_sequence(
        corpus.train,
        d.batch_size,
        d.bptt,
        starts and starts(corpus.train),
        variable=d.variable_bptt,
        seed=config.train.seed,
        pad_to=None if d.variable_bptt else d.bptt,
        max_len=max_len,
        multiple=d.bptt_multiple if d.variable_bptt else 1,
        targets_as_input=sampled,
    )


def train(
    config, callbacks=(), resume=True, init_weights=None, reevaluate=False
):
    """Trains ``config`` and evaluates the best checkpoint.

    Writes into ``config.train.out_dir``: ``config.json``, ``vocab.json``,
    ``run.json`` (metadata), ``log.csv``, TensorBoard logs,
    ``learning_curve.png``, ``best.weights.h5``, ``checkpoint/`` (resume),
    ``model.keras`` (the best weights in a stateless model) and
    ``results.json`` (valid/test of the best checkpoint).

    Args:
        config: a :class:`~keras_rnnlm.config.RunConfig`.
        callbacks: extra Keras callbacks (run after the package's ones,
            before the checkpoint); :class:`StatefulCallback` states are
            saved for resume.
        resume: continue from ``out_dir/checkpoint`` if it exists (a run
            killed at any point loses at most the work since the last
            epoch end or mid-epoch checkpoint, ``train.checkpoint_every_*``;
            one stopped by Ctrl-C or SIGTERM loses nothing); ``False``
            removes the checkpoint and starts over.
        init_weights: a ``.weights.h5`` file to start from (finetuning);
            ignored when resuming from a checkpoint.
        reevaluate: a run whose training is complete and evaluated
            (``results.json``) returns its results at once, unless this
            is true: then its best weights are evaluated again.

    It first prints where the run is (the absolute ``out_dir``) and
    whether it starts, resumes (at which epoch and batch) or is complete.
    SIGINT (Ctrl-C) or SIGTERM during training write a checkpoint at the
    current batch and raise :class:`~keras_rnnlm.callbacks.
    TrainingInterrupted`, which says where it is
    (:class:`~keras_rnnlm.callbacks.StopOnSignal`); a second signal ends
    the process at once.

    With ``train.distribute = "data_parallel"`` (JAX), the model is
    built, trained and validated under the data-parallel
    ``keras.distribution`` (:mod:`keras_rnnlm.training.distribute`); the
    final evaluation too when its batch sizes split over the devices,
    else on one device. With several processes
    (``train.distribute_num_processes``), each feeds its own block of the
    streams, process 0 alone writes ``out_dir`` (which every process must
    see: they all read its checkpoints and best weights), and all return
    the same results.

    Returns:
        The results dict (also in ``results.json``).
    """
    out = os.path.abspath(config.train.out_dir)
    # checked (and the processes joined) before anything is written
    distribution = make_distribution(config)
    writer = is_writer()  # process 0 of several writes
    if writer:
        _make_run_dir(out)
    with run_lock(out) if writer else contextlib.nullcontext():
        with _stop_on_sigterm(out):
            return _train_locked(
                config,
                out,
                distribution,
                callbacks,
                resume,
                init_weights,
                reevaluate,
            )


def _train_locked(
    config, out, distribution, callbacks, resume, init_weights, reevaluate
):
    """:func:`train` in its locked run directory ``out``."""
    if resume:
        check_resumable(config)
        progress = saved_progress(out)
        if _complete(progress, config.train.epochs):
            if is_writer():  # a kill may have come before these
                tidy_checkpoints(out)
                write_epoch_log(
                    os.path.join(out, LOG_FILE), checkpoint_history(out)
                )
            results = _read_results(out)
            done = f"{progress['epochs_done']}/{config.train.epochs} epochs"
            if results is not None and not reevaluate:
                print(
                    f"{out} is complete ({done}; results in "
                    f"{os.path.join(out, RESULTS_FILE)}): nothing to do "
                    "(--re-evaluate evaluates it again, --set "
                    "train.epochs=N trains it on, --no-resume starts over)"
                )
                return results
            print(f"{out} is trained ({done}): evaluating its best weights")
            return evaluate_run(config.train.out_dir, config=config)
    with distribution_scope(distribution):
        corpus = _train(config, callbacks, resume, init_weights)
    barrier("keras_rnnlm.train")  # the best weights are written
    d = config.data
    even = all(
        shards_evenly(distribution, b)
        for b in (d.eval_batch_size or d.batch_size, d.test_batch_size)
    )
    with distribution_scope(distribution if even else None):
        return evaluate_run(config.train.out_dir, config=config, corpus=corpus)


@contextlib.contextmanager
def _stop_on_sigterm(out):
    """SIGTERM outside the epochs (loading, the final evaluation; inside
    them :class:`~keras_rnnlm.callbacks.StopOnSignal` handles it) raises
    :class:`~keras_rnnlm.callbacks.TrainingInterrupted` naming the newest
    checkpoint, as SIGINT raises KeyboardInterrupt: the lock is released
    and the command exits with 143."""
    if not can_handle_signals():
        yield
        return

    def handle(signum, frame):
        raise interrupted_at(signum, out, saved_progress(out))

    previous = signal.signal(signal.SIGTERM, handle)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _complete(progress, epochs):
    """Whether a run's checkpoint (:func:`saved_progress`) ends its
    training: every epoch done, or a callback stopped it."""
    if progress["checkpoint"] is None or progress["batches_done"]:
        return False
    return progress["epochs_done"] >= epochs or progress["stopped"]


def _read_results(out):
    path = os.path.join(out, RESULTS_FILE)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def _make_run_dir(out):
    if os.path.exists(out) and not os.path.isdir(out):
        raise ConfigError(
            f"{out} is a file, not a run directory: give another --out "
            "(train.out_dir)"
        )
    os.makedirs(out, exist_ok=True)


def _train(config, callbacks, resume, init_weights):
    """Trains ``config`` (see :func:`train`); returns the loaded corpus."""
    out = config.train.out_dir
    writer = is_writer()  # process 0 of several writes
    if writer:
        if not resume:  # starting over: no stale checkpoint to resume
            shutil.rmtree(os.path.join(out, CHECKPOINT_DIR), ignore_errors=True)
    corpus, model = prepare_run(config)
    n_params = model_parameters(model)
    print(f"{config.name}: {n_params:,} parameters")
    if writer:
        atomic_write_text(os.path.join(out, CONFIG_FILE), config.to_json())
        corpus.vocab.save(os.path.join(out, VOCAB_FILE))

    d = config.data
    stream = make_train_stream(config, corpus)
    schedule = make_lr_schedule(
        config.train.lr_schedule, config.train.learning_rate
    )
    best = BestCheckpoint(out)
    nan_guard = NaNGuard()
    user = list(callbacks)
    t = config.train
    nt_asgd = None
    if t.nt_asgd_nonmono is not None or t.nt_asgd_from_start:
        nt_asgd = NTASGD(
            out,
            nonmono=nonmono_interval(t.nt_asgd_nonmono),
            start_averaging=t.nt_asgd_from_start,
            stop_when_triggered=t.stop_on_nonmono,
        )
    stateful_cbs = [schedule, best, *([nt_asgd] if nt_asgd else []), *user]
    regularizers = RegularizerLogger()
    curve = LearningCurve(out, title=config.name)
    checkpoint = TrainingCheckpoint(
        out,
        callbacks=[*stateful_cbs, regularizers, curve],
        stream=stream,
        every_steps=t.checkpoint_every_steps,
        every_minutes=t.checkpoint_every_minutes,
    )
    initial_epoch = checkpoint.restore(model) if resume else 0
    skip = checkpoint.resume_batches
    where = os.path.abspath(out)
    epochs = f"epoch {initial_epoch + 1}/{t.epochs}"
    if skip:
        batches = stream.start + len(stream)
        print(f"Resuming {where} at {epochs} after batch {skip}/{batches}")
    elif initial_epoch:
        print(f"Resuming {where} at {epochs}")
    elif init_weights:
        model.load_weights(init_weights)
        print(f"Starting a new run in {where} from {init_weights}")
    else:
        print(f"Starting a new run in {where}")
    meta = {"resumed_at": initial_epoch, "parameters": n_params}
    if not (skip or initial_epoch or init_weights):  # a fresh run
        pretrained = apply_pretrained_embeddings(
            model, corpus.vocab, config.model
        )
        if pretrained:
            print(describe_pretrained(pretrained))
            meta["pretrained_embeddings"] = pretrained
    stop = StopOnSignal(checkpoint)
    progbar = RunProgbar(config.train.epochs, stream)
    cbs = [
        RunMetadata(out, config.to_dict(), meta),
        ResetStates(),
        nan_guard,
        regularizers,
        *([nt_asgd.swap_in] if nt_asgd else []),
        validation_callback(config, corpus),
        schedule,
        *([SequenceLengthLRScale(stream)] if d.variable_bptt else []),
        best,
        *([nt_asgd] if nt_asgd else []),
        *_tensorboard(config, out),
        *user,
        curve,
        checkpoint,
        EpochLog(os.path.join(out, LOG_FILE), checkpoint),
        stop,
        progbar,
        *(
            [TimingLog(os.path.join(out, TIMING_FILE), stream)]
            if t.timing_log
            else []
        ),
    ]
    try:
        with stop.listening():
            _fit_epochs(model, stream, config, initial_epoch, cbs, skip)
    except TrainingInterrupted:
        progbar.close_line()
        raise
    if nan_guard.diverged_at is not None or checkpoint.diverged is not None:
        raise TrainingDivergedError(
            _divergence_message(nan_guard, checkpoint, best)
        )
    return corpus


def _divergence_message(nan_guard, checkpoint, best):
    if nan_guard.diverged_at is not None:
        epoch, batch, loss = nan_guard.diverged_at
        what = f"Loss became {loss} at epoch {epoch + 1}, batch {batch}."
    else:
        epoch, where = checkpoint.diverged
        what = f"Non-finite values in {where} in epoch {epoch + 1}."
    newest = checkpoint.newest()
    if newest is None:
        return (
            f"{what} No checkpoint was written before it: start over with "
            "a lower train.learning_rate (or a gentler train.lr_schedule, "
            "or train.clipnorm) and --no-resume."
        )
    best_part = f" (best weights: {best.path})" if best.best is not None else ""
    return (
        f"{what} The newest checkpoint, whose weights and loss are finite, "
        f"is {newest}{best_part}. Resume from it with a lower "
        "train.learning_rate, a gentler train.lr_schedule or a smaller "
        "train.clipnorm (--set ...; the train section may change on "
        "resume)."
    )


# Where the data lives and how it is evaluated do not change the trained
# model or the training stream.
_RESUME_MAY_CHANGE = {
    ("data", "data_dir"),
    ("data", "eval_batch_size"),
    ("data", "test_batch_size"),
    ("data", "eval_bptt"),
}


def check_resumable(config):
    """Raises ConfigError if ``out_dir`` holds a checkpoint of a run whose
    model or data config differs from ``config`` (resuming it would load
    weights into a different model). The train section may change (e.g.
    more epochs)."""
    out = config.train.out_dir
    saved_path = os.path.join(out, CONFIG_FILE)
    if not (
        os.path.exists(saved_path)
        and os.path.isdir(os.path.join(out, CHECKPOINT_DIR))
    ):
        return
    saved = load_config(saved_path).to_dict()
    current = config.to_dict()
    changed = [
        f"{section}.{key}: {saved[section].get(key)!r} -> {value!r}"
        for section in ("model", "data")
        for key, value in current[section].items()
        if saved[section].get(key) != value
        and (section, key) not in _RESUME_MAY_CHANGE
    ]
    if changed:
        raise ConfigError(
            f"{out} holds a checkpoint of a different run ("
            + "; ".join(changed)
            + "). Use another train.out_dir, or resume=False (--no-resume) "
            "to start over there."
        )


def _fit_epochs(model, stream, config, initial_epoch, callbacks, skip=0):
    """One ``fit`` call per epoch, on :func:`fit_data` of the stream.

    One call per epoch because Keras fixes an epoch's number of batches
    when ``fit`` starts, and variable BPTT windows change it from epoch
    to epoch; and because :func:`fit_data` serves one epoch of the stream
    (on TensorFlow without ``tf.data``'s background threads, which made
    training at two threads run at half speed in a random part of the
    epochs). The callbacks carry their state across the calls and see
    ``on_train_begin`` / ``on_train_end`` once per epoch. A run
    resumed from a mid-epoch checkpoint serves its first epoch from
    window ``skip`` on.
    """
    for epoch in range(initial_epoch, config.train.epochs):
        stream.set_epoch(epoch, skip if epoch == initial_epoch else 0)
        model.fit(
            fit_data(stream),
            epochs=epoch + 1,
            initial_epoch=epoch,
            callbacks=callbacks,
            shuffle=False,
            verbose=config.train.verbose,
        )
        if model.stop_training:
            break


def _tensorboard(config, out):
    if not config.train.tensorboard or not is_writer():
        return []
    try:
        import tensorflow  # noqa: F401
    except ImportError:
        return []
    return [keras.callbacks.TensorBoard(os.path.join(out, TENSORBOARD_DIR))]
