"""Run directories: their file names, the process that writes them, and
reading a run back.

A run directory (``train.out_dir``) holds, under the names of this
module's constants:

* :data:`CONFIG_FILE`: the resolved :class:`~keras_rnnlm.config.RunConfig`;
* :data:`VOCAB_FILE`: the vocabulary;
* :data:`BEST_WEIGHTS_FILE` / :data:`BEST_FILE`: the best weights and
  their epoch and validation loss;
* :data:`LOG_FILE` (the epoch log), :data:`METADATA_FILE` (the run's
  metadata; every start's also appended to :data:`METADATA_LOG_FILE`),
  :data:`LEARNING_CURVE_FILE`, :data:`TENSORBOARD_DIR`, :data:`TIMING_FILE`
  (with ``train.timing_log``);
* :data:`CHECKPOINT_DIR`: the resumable checkpoint,
  :data:`CHECKPOINT_WEIGHTS_FILE` (weights and optimizer) and
  :data:`CHECKPOINT_STATE_FILE`, and a mid-epoch checkpoint's
  :data:`PARTIAL_STATE_FILE` with the files it names;
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
import os

import keras

from keras_rnnlm.config import ConfigError
from keras_rnnlm.config import load_config
from keras_rnnlm.data import Vocabulary
from keras_rnnlm.data import load_corpus
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
CHECKPOINT_DIR = "checkpoint"
#: In :data:`CHECKPOINT_DIR`: the last epoch's weights and optimizer.
CHECKPOINT_WEIGHTS_FILE = "last.weights.h5"
#: In :data:`CHECKPOINT_DIR`: the state of the last epoch checkpoint.
CHECKPOINT_STATE_FILE = "state.json"
#: In :data:`CHECKPOINT_DIR`: the state of the mid-epoch checkpoint.
PARTIAL_STATE_FILE = "partial.json"
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


def atomic_write_text(path, text):
    """Writes ``text`` to ``path`` via a temporary file and a rename, so a
    reader (or a run killed mid-write) never sees half a file."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def run_weights(run_dir, weights=None):
    """The weights file of a run: ``weights`` if given, else the run's
    :data:`BEST_WEIGHTS_FILE`. Raises FileNotFoundError if it does not exist."""
    if weights:
        if not os.path.exists(weights):
            raise missing_path(weights)
        return weights
    weights = os.path.join(run_dir, BEST_WEIGHTS_FILE)
    if not os.path.exists(weights):
        raise FileNotFoundError(
            f"{run_dir} has no {BEST_WEIGHTS_FILE} yet: the run has not "
            "finished an epoch (--weights FILE names other weights)"
        )
    return weights


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
