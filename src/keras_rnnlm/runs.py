"""Run directories: their file names, the process that writes them
(and its lock), the verified reading of their weights, and reading a run
back.

A run directory (``train.out_dir``) holds, under the names of this
module's constants:

* :data:`CONFIG_FILE`: the resolved :class:`~keras_rnnlm.config.RunConfig`;
* :data:`VOCAB_FILE`: the vocabulary;
* :data:`BEST_WEIGHTS_FILE` / :data:`BEST_FILE`: the best weights and
  their epoch, validation loss and SHA-256; the best weights before them
  in :data:`BEST_PREVIOUS_WEIGHTS_FILE` (:func:`write_best_weights`,
  read back by :func:`run_weights`);
* :data:`LOG_FILE` (the epoch log), :data:`METADATA_FILE` (the run's
  metadata; every start's also appended to :data:`METADATA_LOG_FILE`),
  :data:`LEARNING_CURVE_FILE`, :data:`TENSORBOARD_DIR`, :data:`TIMING_FILE`
  (with ``train.timing_log``);
* :data:`CHECKPOINT_DIR`: the resumable checkpoints, each a folder
  written whole under a temporary name and renamed once
  (:mod:`keras_rnnlm.callbacks.checkpoint`): :data:`CHECKPOINT_WEIGHTS_FILE`
  (weights and optimizer), :data:`CHECKPOINT_STATE_FILE`, a mid-epoch
  checkpoint's :data:`CHECKPOINT_ARRAYS_FILE`, the files of callbacks,
  and :data:`CHECKPOINT_MANIFEST_FILE` (sizes and SHA-256 of the others,
  written last);
* :data:`LOCK_FILE` while a process trains in it (:func:`run_lock`);
* :data:`RESULTS_FILE` and :data:`MODEL_FILE` after evaluation;
* what later commands add: :data:`CACHE_DIR` (the cache search),
  :data:`DYNAMIC_EVAL_FILE` per split, :data:`FINETUNE_DIR` per
  finetuning round (each a run directory), :data:`WORD2VEC_FILE`.

Everything that reads a run (evaluation, dynamic evaluation, ranking,
ensembles, analyses, scoring, tuning) goes through this module, so none of
them depends on the trainer; it depends on the configuration and the data
only, so the callbacks that write a run need nothing of the models.
"""

import contextlib
import errno
import functools
import json
import os
import shutil
import signal
import socket
import sys
import time

import keras
import numpy as np

try:
    import fcntl
except ImportError:  # not a POSIX system
    fcntl = None

from keras_rnnlm.config import ConfigError
from keras_rnnlm.config import load_config
from keras_rnnlm.data import Vocabulary
from keras_rnnlm.data import load_corpus
from keras_rnnlm.data.download import sha256_file
from keras_rnnlm.data.sentences import sentence_rule
from keras_rnnlm.data.sentences import sentence_starts

CONFIG_FILE = "config.json"
VOCAB_FILE = "vocab.json"
BEST_WEIGHTS_FILE = "best.weights.h5"
BEST_FILE = "best.json"
LOG_FILE = "log.csv"
METADATA_FILE = "run.json"
METADATA_LOG_FILE = "runs.jsonl"
LEARNING_CURVE_FILE = "learning_curve.png"
TENSORBOARD_DIR = "tensorboard"
#: Each training batch's end and tokens (``train.timing_log``).
TIMING_FILE = "timing.csv"
#: The best weights before the current :data:`BEST_WEIGHTS_FILE`.
BEST_PREVIOUS_WEIGHTS_FILE = "best.previous.weights.h5"
CHECKPOINT_DIR = "checkpoint"
#: In a checkpoint (a folder of :data:`CHECKPOINT_DIR`): the weights and
#: the optimizer state.
CHECKPOINT_WEIGHTS_FILE = "model.weights.h5"
#: In a checkpoint: the epoch, history, callbacks' and stream's state.
CHECKPOINT_STATE_FILE = "state.json"
#: In a mid-epoch checkpoint: the non-trainable variables (carried state,
#: seed generators) and the epoch's metric totals.
CHECKPOINT_ARRAYS_FILE = "arrays.npz"
#: In a checkpoint, written last: where it stands and every other file's
#: size and SHA-256.
CHECKPOINT_MANIFEST_FILE = "manifest.json"
#: Present while a process trains in the run directory (:func:`run_lock`).
LOCK_FILE = "train.lock"
RESULTS_FILE = "results.json"
MODEL_FILE = "model.keras"
CACHE_DIR = "cache"
#: ``.format(split=...)``: a split's dynamic evaluation.
DYNAMIC_EVAL_FILE = "dynamic_eval_{split}.json"
#: ``.format(round=...)``: the run directory of a finetuning round.
FINETUNE_DIR = "finetune{round}"
#: ``.format(dim=...)``: the word2vec vectors trained for the run.
WORD2VEC_FILE = "word2vec_{dim}d.bin"


def is_writer():
    """Whether this process writes the run directory.

    Always with one process. With several (``keras.distribution.
    initialize``, JAX), process 0 only: every process trains, validates
    and reads the checkpoints (the run directory must be on a file
    system that they all see), one writes them.
    """
    if keras.backend.backend() != "jax":
        return True
    import jax  # the JAX backend (checked above)

    return jax.process_index() == 0


@contextlib.contextmanager
def local_scope():
    """No ``keras.distribution`` inside: for what one process does alone
    (process 0 saving the run's files). Keras's saving creates objects of
    its own (reference optimizers), and under a multi-process distribution
    creating a variable is a collective that every process would have to
    join; here they are created on this process's devices."""
    previous = keras.distribution.distribution()
    if previous is None:
        yield
        return
    keras.distribution.set_distribution(None)
    try:
        yield
    finally:
        keras.distribution.set_distribution(previous)


@contextlib.contextmanager
def atomic_path(path, suffix=".tmp"):
    """Yields a temporary path beside ``path`` to write; on success it
    replaces ``path`` in one rename, so a reader (or a run killed
    mid-write) never sees half a file. An error (a full disk) names
    ``path`` and leaves no temporary file."""
    tmp = f"{path}{suffix}"
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise path_error(e, path) from e


def atomic_write_text(path, text):
    """Writes ``text`` to ``path`` through :func:`atomic_path`."""
    with atomic_path(path) as tmp:
        with open(tmp, "w") as f:
            f.write(text)


def path_error(error, path):
    """``error`` (an OSError), naming ``path`` if it names no file."""
    if error.filename or not error.errno:
        return error
    return type(error)(error.errno, os.strerror(error.errno), path)


class RunFileError(ValueError):
    """A file of a run directory is unreadable, corrupt, or disagrees with
    the run's other files; the message names the file and what is wrong
    with it, in one line."""


class RunLockedError(RuntimeError):
    """Another process trains in the run directory (:func:`run_lock`)."""


# -- named points of the run directory's writes (fault injection) ---------

#: ``POINT[:N]``: the process kills itself (SIGKILL) the ``N``-th time
#: (default 1) it reaches the named point ``POINT`` of :data:`WRITE_POINTS`
#: (the fault-injection tests kill a run at every point this way).
KILL_AT_VARIABLE = "KERAS_RNNLM_KILL_AT"


def _checkpoint_points(kind):
    steps = (
        "weights",  # the weights and optimizer, in the temporary folder
        "arrays",  # a mid-epoch checkpoint's arrays
        "files",  # the callbacks' files (NT-ASGD's average)
        "state",  # state.json
        "manifest",  # manifest.json: complete, under its temporary name
        "renamed",  # renamed into place: the newest checkpoint
        "pruned",  # older checkpoints removed
    )
    return tuple(
        f"{kind}.{step}"
        for step in steps
        if step != "arrays" or kind == "mid_epoch_checkpoint"
    )


#: The named points of a training run's writes, in the order of a run:
#: right after the lock is taken; after each step of the best weights'
#: replacement (:func:`write_best_weights`); after each step of an epoch
#: and of a mid-epoch checkpoint (:mod:`keras_rnnlm.callbacks.checkpoint`);
#: after ``log.csv``, ``model.keras`` and ``results.json`` are written.
WRITE_POINTS = (
    "lock.taken",
    "best.written",
    "best.kept",
    "best.recorded",
    "best.renamed",
    *_checkpoint_points("checkpoint"),
    *_checkpoint_points("mid_epoch_checkpoint"),
    "log.written",
    "model.written",
    "results.written",
)

_points_reached = {}


def write_point(name):
    """Marks the named point ``name`` (of :data:`WRITE_POINTS`) of a write;
    kills the process there when :data:`KILL_AT_VARIABLE` says so."""
    if name not in WRITE_POINTS:
        raise ValueError(f"{name!r} is not one of WRITE_POINTS")
    target = os.environ.get(KILL_AT_VARIABLE)
    if not target:
        return
    point, _, count = target.partition(":")
    if point != name:
        return
    _points_reached[name] = _points_reached.get(name, 0) + 1
    if _points_reached[name] == int(count or 1):
        os.kill(os.getpid(), signal.SIGKILL)


# -- the lock of a run directory -------------------------------------------


@contextlib.contextmanager
def run_lock(run_dir):
    """Holds the lock of ``run_dir`` (an existing directory) for the block:
    the one process that trains (or finetunes) in it.

    The lock is :data:`LOCK_FILE`, holding the owner's pid, host, start
    time and command line, taken atomically (an exclusive ``flock`` on
    it; the file's creation alone where there is no ``fcntl``) before the
    block writes anything, and removed when the block ends, by an
    exception or a signal too. Another process gets
    :class:`RunLockedError` naming the owner. A lock file left on this
    host by a process that is gone (killed: the system released its
    ``flock``) is taken over, with a one-line notice on stderr; one of
    another host is refused (its process may still run there): the
    message says to remove the file if that process is gone.

    Readers (evaluation, scoring) take no lock: every file they read is
    replaced whole, by a rename, and verified when read.
    """
    path = os.path.join(run_dir, LOCK_FILE)
    fd = _take_lock(run_dir, path)
    try:
        write_point("lock.taken")
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.remove(path)
        os.close(fd)  # releases the flock after the file is gone


def _this_host():
    return socket.gethostname()


def _take_lock(run_dir, path):
    if fcntl is None:
        return _take_lock_file(run_dir, path)
    for _ in range(20):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = _read_owner(fd, wait=True)
            os.close(fd)
            raise RunLockedError(
                _locked_message(run_dir, path, owner)
            ) from None
        except OSError:
            os.close(fd)
            raise
        if not _same_file(fd, path):  # its owner removed it meanwhile
            os.close(fd)
            continue
        owner = _read_owner(fd)
        if owner:
            if owner.get("host") != _this_host():
                os.close(fd)
                raise RunLockedError(_locked_message(run_dir, path, owner))
            print(
                f"{run_dir}: taking over the lock of pid {owner.get('pid')} "
                f"on {owner.get('host')} (since {owner.get('since')}): that "
                "process is gone",
                file=sys.stderr,
            )
        os.ftruncate(fd, 0)
        os.pwrite(fd, _owner_record(), 0)
        os.fsync(fd)
        return fd
    raise RunLockedError(
        f"{run_dir} is locked and unlocked by other processes in turn "
        f"({path}): run one training there at a time"
    )


def _take_lock_file(run_dir, path):
    # Without flock the file's atomic creation is the lock; a stale one
    # cannot be told from a live one, so it is reported, not taken over.
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        with open(path, "rb") as f:
            owner = _parse_owner(f.read())
        raise RunLockedError(
            _locked_message(run_dir, path, owner, stale_hint=True)
        ) from None
    os.write(fd, _owner_record())
    return fd


def _owner_record():
    return json.dumps(
        {
            "pid": os.getpid(),
            "host": _this_host(),
            "since": time.strftime("%Y-%m-%d %H:%M:%S %z"),
            "command": sys.argv,
        }
    ).encode()


def _parse_owner(data):
    try:
        owner = json.loads(data.decode() or "null")
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return owner if isinstance(owner, dict) else None


def _read_owner(fd, wait=False):
    # the owner writes its record right after it takes the lock
    for _ in range(20 if wait else 1):
        owner = _parse_owner(os.pread(fd, 1 << 16, 0))
        if owner or not wait:
            return owner
        time.sleep(0.05)
    return None


def _same_file(fd, path):
    try:
        a, b = os.fstat(fd), os.stat(path)
    except FileNotFoundError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _locked_message(run_dir, path, owner, stale_hint=False):
    if not owner:
        who = "another process"
    else:
        who = (
            f"pid {owner.get('pid')} on {owner.get('host')}, training there "
            f"since {owner.get('since')}"
        )
    hint = "wait for it to end or stop it, or give another --out"
    if stale_hint or (owner and owner.get("host") != _this_host()):
        hint += f"; if that process is gone, remove {path}"
    return f"{run_dir} is in use by {who} ({path}): {hint}"


# -- verified weights ----------------------------------------------------------


def weights_file_problem(path):
    """What is wrong with the ``.weights.h5`` file ``path`` (a phrase), or
    ``None``: it must be a readable HDF5 file whose floating-point
    datasets (weights, optimizer variables) are all finite."""
    import h5py  # Keras's weights format

    bad = []

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset) and obj.dtype.kind == "f":
            if not np.all(np.isfinite(obj[()])):
                bad.append(name)

    try:
        with h5py.File(path, "r") as f:
            f.visititems(visit)
    except FileNotFoundError:
        return "missing"
    except (OSError, RuntimeError, KeyError, ValueError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        return f"not a readable weights file ({reason})"
    if bad:
        more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
        return f"non-finite values (NaN or infinity) in {bad[0]}{more}"
    return None


def read_best_record(run_dir):
    """The run's :data:`BEST_FILE` as a dict (``{}`` if it is missing or
    unreadable: the weights are then checked without their digest)."""
    try:
        with open(os.path.join(run_dir, BEST_FILE)) as f:
            record = json.load(f)
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def write_best_weights(run_dir, save, record):
    """Replaces the run's best weights: ``save(path)`` writes them.

    The new weights are written to a temporary file and hashed; the
    current best weights, if they have their recorded digest and come from
    an earlier epoch (not the same epoch trained again after a resume),
    are kept as :data:`BEST_PREVIOUS_WEIGHTS_FILE` (a hard link, else a
    copy); :data:`BEST_FILE` is written with ``record`` (epoch,
    validation loss), the new SHA-256, under ``"previous"`` the previous
    best's record and under ``"replacing"`` the digest of the file being
    replaced; then the new weights are renamed into place. A reader
    (:func:`run_weights`) accepts a weights file with any of these
    digests, so a kill (or a read) between any two steps finds whole,
    verified best weights.
    """
    best = os.path.join(run_dir, BEST_WEIGHTS_FILE)
    tmp = best + ".tmp.weights.h5"
    try:
        save(tmp)
        digest = sha256_file(tmp)
        write_point("best.written")
        old = read_best_record(run_dir)
        previous = old.get("previous")
        current = sha256_file(best) if os.path.exists(best) else None
        if current == old.get("sha256") and current and _earlier(old, record):
            _keep_copy(best, os.path.join(run_dir, BEST_PREVIOUS_WEIGHTS_FILE))
            previous = {
                k: v
                for k, v in old.items()
                if k not in ("previous", "replacing")
            }
            write_point("best.kept")
        # "replacing": the file that is still in place until the rename
        record = {
            **record,
            "sha256": digest,
            "previous": previous,
            "replacing": current,
        }
        atomic_write_text(
            os.path.join(run_dir, BEST_FILE), json.dumps(record, indent=2)
        )
        write_point("best.recorded")
        os.replace(tmp, best)
        write_point("best.renamed")
    except OSError:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def _earlier(old, new):
    """Whether best weights recorded as ``old`` come from an earlier epoch
    than ``new`` (not from the same epoch, trained again after a
    resume)."""
    try:
        return int(old["epoch"]) < int(new["epoch"])
    except (KeyError, TypeError, ValueError):
        return True


def _keep_copy(path, copy):
    """``copy`` becomes a whole copy of ``path`` (a hard link where the
    file system has them), put in place by a rename."""
    if os.path.exists(copy) and os.path.samefile(path, copy):
        return  # a link already (rename() would leave the temporary)
    tmp = copy + ".tmp"
    with contextlib.suppress(FileNotFoundError):
        os.remove(tmp)
    try:
        os.link(path, tmp)
    except OSError:
        shutil.copyfile(path, tmp)
    os.replace(tmp, copy)


def _best_problem(path, record):
    """What is wrong with best weights ``path`` given the run's best
    record (:func:`read_best_record`), or ``None``."""
    if not os.path.exists(path):
        return "missing"
    accepted = {
        r.get("sha256")
        for r in (record, record.get("previous") or {})
        if isinstance(r, dict) and r.get("sha256")
    }
    if accepted and record.get("replacing"):
        accepted.add(record["replacing"])
    if accepted and sha256_file(path) not in accepted:
        return (
            f"its SHA-256 is not the one {BEST_FILE} records (a corrupt or "
            "replaced file)"
        )
    return weights_file_problem(path)


def _best_epoch(path, record):
    """``" (epoch N)"``: the epoch of the record whose digest ``path``
    has (``""`` if none)."""
    digest = sha256_file(path)
    for r in (record, record.get("previous") or {}):
        if isinstance(r, dict) and r.get("sha256") == digest:
            if r.get("epoch") is not None:
                return f" (epoch {int(r['epoch']) + 1})"
    return ""


def run_weights(run_dir, weights=None):
    """The verified weights file of a run: ``weights`` if given, else the
    run's :data:`BEST_WEIGHTS_FILE`.

    A weights file must be readable with every value finite, and best
    weights must have a digest that :data:`BEST_FILE` records (when it
    records one). Best weights that fail fall back to
    :data:`BEST_PREVIOUS_WEIGHTS_FILE`, with a one-line message on
    stderr; when that fails too, or a given ``weights`` fails, it is a
    :class:`RunFileError` naming the file. Raises FileNotFoundError if
    there are no weights.
    """
    if weights:
        if not os.path.exists(weights):
            raise missing_path(weights)
        problem = weights_file_problem(weights)
        if problem:
            raise RunFileError(f"{weights}: {problem}")
        return weights
    best = os.path.join(run_dir, BEST_WEIGHTS_FILE)
    previous = os.path.join(run_dir, BEST_PREVIOUS_WEIGHTS_FILE)
    if not (os.path.exists(best) or os.path.exists(previous)):
        raise FileNotFoundError(
            f"{run_dir} has no {BEST_WEIGHTS_FILE} yet: the run has not "
            "finished an epoch (--weights FILE names other weights)"
        )
    record = read_best_record(run_dir)
    problem = _best_problem(best, record)
    if problem is None:
        return best
    if os.path.exists(previous) and _best_problem(previous, record) is None:
        print(
            f"{best}: {problem}; using the previous best weights "
            f"{previous}{_best_epoch(previous, record)} instead",
            file=sys.stderr,
        )
        return previous
    raise RunFileError(
        f"{best}: {problem}, and the run has no good previous best "
        "weights: train the run again (--no-resume) or give --weights FILE"
    )


def missing_path(path):
    """The error of a path that does not exist, in the one wording of the
    command line (``No such file or directory: PATH``)."""
    return FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)


def load_run(run_dir):
    """Reads a run's config and vocabulary. Raises FileNotFoundError if
    ``run_dir`` is not a directory or lacks one of them."""
    if not os.path.exists(run_dir):
        raise missing_path(run_dir)
    for name in (CONFIG_FILE, VOCAB_FILE):
        path = os.path.join(run_dir, name)
        if not os.path.exists(path):
            raise FileNotFoundError(
                f"{run_dir} is not a run directory (no {name}): give the "
                "--out of a keras-rnnlm train run"
            )
    config = load_config(os.path.join(run_dir, CONFIG_FILE))
    vocab = Vocabulary.load(os.path.join(run_dir, VOCAB_FILE))
    return config, vocab


def open_run(run_dir):
    """A run's config and its corpus (read with the run's vocabulary)."""
    config, vocab = load_run(run_dir)
    return config, load_run_corpus(config, vocab)


def load_run_corpus(config, vocab=None):
    """The corpus of a run (``vocab``: reuse a saved vocabulary).

    ``data.max_train_tokens`` keeps only that prefix of the training
    split (for every consumer: trainer, tuners, sampler counts)."""
    d = config.data
    if d.max_train_tokens is not None and d.max_train_tokens < 2 * d.batch_size:
        raise ConfigError(
            f"data.max_train_tokens={d.max_train_tokens} leaves no window "
            f"at batch size {d.batch_size} (at least {2 * d.batch_size})"
        )
    return load_corpus(
        d.corpus,
        data_dir=d.data_dir,
        level=d.level,
        vocab=vocab,
        max_tokens=d.max_tokens,
        max_train_tokens=d.max_train_tokens,
    )


def run_sentence_starts(config, corpus):
    """:func:`sentence_starts_of` ``corpus`` for a sentence-level run
    (``data.state_reset = "sentence"``), else ``None``: what the run's
    evaluators (static, dynamic, cache) reset at."""
    if config.data.state_reset != "sentence":
        return None
    return sentence_starts_of(corpus)


def sentence_starts_of(corpus):
    """``starts(ids)``: where a sentence of ``corpus`` starts
    (:func:`~keras_rnnlm.data.sentences.sentence_starts` with the
    corpus's vocabulary and rule)."""
    rule = sentence_rule(corpus.name)
    return functools.partial(sentence_starts, vocab=corpus.vocab, rule=rule)
