"""Run directories for tests: the three files every run command reads
(``config.json``, ``vocab.json``, ``best.weights.h5``), and what a test
reads back from a trained one (the epoch log, the newest checkpoint)."""

import csv
import json
import os

import numpy as np

from keras_rnnlm.models import build_language_model
from keras_rnnlm.runs import load_run_corpus


def write_run_dir(out, config, vocab, model):
    """Writes ``config``, ``vocab`` and ``model``'s weights into ``out``
    (created if missing); returns ``out`` as a string."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        f.write(config.to_json())
    vocab.save(os.path.join(out, "vocab.json"))
    model.save_weights(os.path.join(out, "best.weights.h5"))
    return str(out)


def write_random_run(config, out, seed=5):
    """A run directory of ``config`` with random weights (for checks
    that must hold on any weights); returns ``(run_dir, corpus)``."""
    corpus = load_run_corpus(config)
    model = build_language_model(
        config.model, len(corpus.vocab), None, stateful=False, seed=seed
    )
    return write_run_dir(out, config, corpus.vocab, model), corpus


def run_log(run_dir):
    """The rows of ``run_dir/log.csv`` (one dict of strings an epoch)."""
    with open(os.path.join(run_dir, "log.csv")) as f:
        return list(csv.DictReader(f))


def newest_checkpoint(run_dir):
    """The folder of the newest checkpoint of ``run_dir``."""
    from keras_rnnlm.callbacks.checkpoint import checkpoints

    found = checkpoints(str(run_dir))
    assert found, f"{run_dir} has no checkpoint"
    return found[0]


def checkpoint_state(run_dir):
    """The ``state.json`` of the newest checkpoint of ``run_dir``."""
    with open(os.path.join(newest_checkpoint(run_dir), "state.json")) as f:
        return json.load(f)


def checkpoint_weights(config):
    """The model weights (NumPy arrays) of the newest checkpoint of the
    run ``config`` trained."""
    from keras_rnnlm.training import prepare_run

    _, model = prepare_run(config)
    model.optimizer.build(model.trainable_variables)
    folder = newest_checkpoint(config.train.out_dir)
    model.load_weights(os.path.join(folder, "model.weights.h5"))
    return [np.asarray(w) for w in model.get_weights()]
