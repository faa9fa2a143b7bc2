"""Shared fixtures: a tiny synthetic corpus and a tiny run config."""

import os
import shutil
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from run_dirs import write_run_dir  # noqa: E402
from tiny_configs import tiny_run_dict  # noqa: E402

from keras_rnnlm.config import RunConfig  # noqa: E402


def pytest_configure(config):
    """The commands the tests run keep XLA's programs in one directory of
    this test run (the workers inherit it; removed at the end), not in
    the user's cache (:mod:`keras_rnnlm._compile_cache`)."""
    if hasattr(config, "workerinput"):
        return
    if "KERAS_RNNLM_COMPILE_CACHE" not in os.environ:
        path = tempfile.mkdtemp(prefix="keras_rnnlm_test_xla_")
        os.environ["KERAS_RNNLM_COMPILE_CACHE"] = path
        config.keras_rnnlm_compile_cache = path


def pytest_unconfigure(config):
    path = getattr(config, "keras_rnnlm_compile_cache", None)
    if path:
        shutil.rmtree(path, ignore_errors=True)


def _sentences(rng, n):
    # A small "grammar" with learnable structure: subject verb object.
    subj = ["the cat", "a dog", "my friend", "the bird"]
    verb = ["sees", "likes", "eats", "finds"]
    obj = ["the fish", "a ball", "some food", "the tree"]
    lines = []
    for _ in range(n):
        s = f"{subj[rng.integers(4)]} {verb[rng.integers(4)]} "
        s += f"{obj[rng.integers(4)]} ."
        lines.append(s)
    return lines


@pytest.fixture(scope="session")
def tiny_corpus_dir(tmp_path_factory):
    """A word-level corpus directory: train/valid/test.txt."""
    d = tmp_path_factory.mktemp("tiny_corpus")
    rng = np.random.default_rng(0)
    for split, n in (("train", 600), ("valid", 60), ("test", 60)):
        (d / f"{split}.txt").write_text("\n".join(_sentences(rng, n)) + "\n")
    return str(d)


@pytest.fixture
def tiny_config(tiny_corpus_dir, tmp_path):
    return RunConfig.from_dict(tiny_run_dict(tiny_corpus_dir, tmp_path / "run"))


def train_tiny_run(out, corpus_dir, level="word", epochs=10):
    """Fits a tiny LSTM LM on ``corpus_dir`` and writes a run directory
    (config.json, vocab.json, best.weights.h5) without the full trainer's
    evaluation and logging, to keep the tests fast.

    Ten epochs (~330 steps, a few seconds): after three, the sentence-start
    distribution from the zero state was still near uniform, and an N-best
    list whose hypotheses differ in the first word was ranked by chance
    (the test failed on one machine and passed on another)."""
    from keras_rnnlm.config import RunConfig
    from keras_rnnlm.data.streams import LMSequence
    from keras_rnnlm.training.trainer import prepare_run

    config = RunConfig.from_dict(
        {
            "name": "tiny_scoring",
            "data": {
                "corpus": corpus_dir,
                "level": level,
                "batch_size": 8,
                "bptt": 16,
            },
            "model": {
                "embedding_dim": 16,
                "hidden_sizes": [16, 16],
                "init_range": 0.1,
            },
            "train": {
                "epochs": epochs,
                "optimizer": "adam",
                "learning_rate": 0.02,
                "clipnorm": 5.0,
                "out_dir": str(out),
                "tensorboard": False,
                "verbose": 0,
            },
        }
    )
    os.makedirs(out, exist_ok=True)
    corpus, model = prepare_run(config)
    stream = LMSequence(corpus.train, 8, 16, pad_to=16)
    model.fit(stream, epochs=epochs, verbose=0, shuffle=False)
    return write_run_dir(out, config, corpus.vocab, model)


def shared_tiny_run(tmp_path_factory, corpus_dir):
    """The run, trained once per session (scoring, export, analyses and
    dynamic evaluation share it)."""
    out = tmp_path_factory.getbasetemp() / "tiny_scoring_run"
    if not (out / "best.weights.h5").exists():
        train_tiny_run(out, corpus_dir)
    return str(out)


@pytest.fixture(scope="session")
def tiny_run(tiny_corpus_dir, tmp_path_factory):
    return shared_tiny_run(tmp_path_factory, tiny_corpus_dir)


@pytest.fixture(scope="session")
def tiny_export(tiny_run, tmp_path_factory):
    """(run_dir, the default SavedModel export of the shared tiny run, laid
    out as ``tiny_lm/1``), exported once per session (the export and
    serving tests share it; they read it, or copy it to change it)."""
    from keras_rnnlm.export import export_saved_model

    path = tmp_path_factory.mktemp("tiny_export") / "tiny_lm" / "1"
    export_saved_model(tiny_run, str(path))
    return tiny_run, str(path)
