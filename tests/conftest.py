"""Shared fixtures: a tiny synthetic corpus and a tiny run config."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from keras_rnnlm.config import RunConfig  # noqa: E402


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
    return RunConfig.from_dict(
        {
            "name": "tiny",
            "data": {
                "corpus": tiny_corpus_dir,
                "level": "word",
                "batch_size": 4,
                "bptt": 8,
                "eval_batch_size": 2,
                "test_batch_size": 1,
            },
            "model": {
                "embedding_dim": 16,
                "hidden_sizes": [16, 16],
                "init_range": 0.1,
            },
            "train": {
                "epochs": 2,
                "optimizer": "adam",
                "learning_rate": 0.01,
                "clipnorm": 5.0,
                "out_dir": str(tmp_path / "run"),
                "tensorboard": False,
                "verbose": 0,
            },
        }
    )
