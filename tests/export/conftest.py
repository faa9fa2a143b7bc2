"""The tiny trained run of tests/scoring, exported once per session."""

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
def export_run(tiny_corpus_dir, tmp_path_factory):
    return _scoring_helpers().shared_tiny_run(tmp_path_factory, tiny_corpus_dir)


@pytest.fixture(scope="session")
def exported(export_run, tmp_path_factory):
    """(run_dir, SavedModel path laid out as NAME/1)."""
    from keras_rnnlm.export import export_saved_model

    path = tmp_path_factory.mktemp("served") / "tiny_lm" / "1"
    export_saved_model(export_run, str(path))
    return export_run, str(path)
