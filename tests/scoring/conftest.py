"""The Scorer over the shared tiny run (tests/conftest.py)."""

import pytest


@pytest.fixture(scope="session")
def tiny_scorer(tiny_run):
    from keras_rnnlm.scoring import Scorer

    return Scorer.from_run(tiny_run)
