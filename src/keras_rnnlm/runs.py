"""Run directories: their file names, reading a run back, and the
evaluator of a run.

A run directory (``train.out_dir``) holds:

* ``config.json``: the resolved :class:`~keras_rnnlm.config.RunConfig`;
* ``vocab.json``: the vocabulary;
* ``best.weights.h5`` / ``best.json``: the best weights and their epoch;
* ``log.csv``, ``run.json``, ``learning_curve.png``, ``tensorboard/``;
* ``checkpoint/``: the resumable checkpoint (weights, optimizer, state);
* ``results.json`` and ``model.keras`` after evaluation.

Everything that reads a run (evaluation, dynamic evaluation, ranking,
ensembles, analyses, scoring, tuning) goes through this module, so none of
them depends on the trainer.
"""

import contextlib
import functools
import json
import os

import keras

from keras_rnnlm.config import ConfigError
from keras_rnnlm.config import load_config
from keras_rnnlm.data import Vocabulary
from keras_rnnlm.data import load_corpus
from keras_rnnlm.data.sentences import sentence_rule
from keras_rnnlm.data.sentences import sentence_starts
from keras_rnnlm.evaluator import Evaluator
from keras_rnnlm.models import build_language_model

CONFIG_FILE = "config.json"
VOCAB_FILE = "vocab.json"
BEST_WEIGHTS_FILE = "best.weights.h5"
BEST_FILE = "best.json"
LOG_FILE = "log.csv"
METADATA_FILE = "run.json"
RESULTS_FILE = "results.json"
MODEL_FILE = "model.keras"
CHECKPOINT_DIR = "checkpoint"


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
    ``best.weights.h5``. Raises FileNotFoundError if it does not exist."""
    weights = weights or os.path.join(run_dir, BEST_WEIGHTS_FILE)
    if not os.path.exists(weights):
        raise FileNotFoundError(
            f"No weights at {weights}: the run has not finished an epoch"
        )
    return weights


def load_run(run_dir):
    """Reads a run's config and vocabulary."""
    for name in (CONFIG_FILE, VOCAB_FILE):
        path = os.path.join(run_dir, name)
        if not os.path.exists(path):
            raise FileNotFoundError(
                f"{run_dir} is not a run directory: no {name}"
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


def make_evaluator(config, corpus, batch_size, bptt=None, **kwargs):
    """The run's Evaluator for one batch size (and window); ``kwargs``
    go to :class:`~keras_rnnlm.evaluation.Evaluator`. With
    ``data.state_reset = "sentence"`` it resets the state at every
    sentence start (:func:`sentence_starts_of`)."""
    kwargs.setdefault("sentence_starts", run_sentence_starts(config, corpus))
    return Evaluator(
        config.model,
        len(corpus.vocab),
        batch_size,
        bptt or config.data.eval_bptt or config.data.bptt,
        char_level=corpus.is_char_level,
        jit_compile=config.train.jit_compile,
        **kwargs,
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


def evaluate_run(
    run_dir,
    splits=("valid", "test"),
    batch_sizes=None,
    bptt=None,
    weights=None,
    config=None,
    corpus=None,
    write=True,
):
    """Evaluates a run's best (or given) weights on its corpus splits.

    Args:
        run_dir: the run directory.
        splits: split names.
        batch_sizes: dict split -> batch size (default: the run's
            ``eval_batch_size`` for valid, ``test_batch_size`` for test).
        bptt: evaluation window (default: the run's).
        weights: a ``.weights.h5`` file (default: ``best.weights.h5``).
        config, corpus: the run's, if already loaded.
        write: write ``results.json`` and ``model.keras``.
    """
    if config is None:
        config, vocab = load_run(run_dir)
    else:
        vocab = None
    d = config.data
    if corpus is None:
        corpus = load_run_corpus(config, vocab)
    weights = run_weights(run_dir, weights)
    defaults = {
        "train": d.batch_size,
        "valid": d.eval_batch_size or d.batch_size,
        "test": d.test_batch_size,
    }
    batch_sizes = {**defaults, **(batch_sizes or {})}
    results = {"weights": weights}
    for split in splits:
        ev = make_evaluator(config, corpus, batch_sizes[split], bptt)
        ev.load_weights(weights)
        r = ev.evaluate(corpus.split(split))
        results[split] = {**r, "batch_size": batch_sizes[split]}
        line = f"{split}: ppl {r['ppl']:.2f}"
        if "bpc" in r:
            line += f", bpc {r['bpc']:.4f}"
        print(f"{line} ({r['tokens']} tokens, batch {batch_sizes[split]})")
    if write and is_writer():
        _write_results(run_dir, config, corpus, weights, results)
    return results


def _write_results(run_dir, config, corpus, weights, results):
    with local_scope():
        atomic_write_text(
            os.path.join(run_dir, RESULTS_FILE),
            json.dumps(results, indent=2),
        )
        stateless = build_language_model(
            config.model, len(corpus.vocab), None, stateful=False
        )
        stateless.load_weights(weights)
        stateless.save(os.path.join(run_dir, MODEL_FILE))
