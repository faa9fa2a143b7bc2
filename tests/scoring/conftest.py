"""A tiny trained word-level run directory, shared by the scoring tests."""

import os

import pytest


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
    with open(os.path.join(out, "config.json"), "w") as f:
        f.write(config.to_json())
    corpus.vocab.save(os.path.join(out, "vocab.json"))
    model.save_weights(os.path.join(out, "best.weights.h5"))
    return str(out)


def shared_tiny_run(tmp_path_factory, corpus_dir):
    """The run, trained once per session (tests/export reuses it)."""
    out = tmp_path_factory.getbasetemp() / "tiny_scoring_run"
    if not (out / "best.weights.h5").exists():
        train_tiny_run(out, corpus_dir)
    return str(out)


@pytest.fixture(scope="session")
def tiny_run(tiny_corpus_dir, tmp_path_factory):
    return shared_tiny_run(tmp_path_factory, tiny_corpus_dir)


@pytest.fixture(scope="session")
def tiny_scorer(tiny_run):
    from keras_rnnlm.scoring import Scorer

    return Scorer.from_run(tiny_run)
