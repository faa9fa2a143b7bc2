"""The tiny trained run of tests/scoring, shared with the analyses."""

import importlib.util
import os

import pytest

_SCORING_CONFTEST = os.path.join(
    os.path.dirname(__file__), "..", "scoring", "conftest.py"
)


def _scoring_helpers():
    spec = importlib.util.spec_from_file_location(
        "_scoring_conftest_helpers", _SCORING_CONFTEST
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def analysis_run(tiny_corpus_dir, tmp_path_factory):
    return _scoring_helpers().shared_tiny_run(tmp_path_factory, tiny_corpus_dir)
