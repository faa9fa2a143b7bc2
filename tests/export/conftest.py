"""The shared tiny run (tests/conftest.py), exported once per session."""

import pytest


@pytest.fixture(scope="session")
def exported(tiny_export):
    """(run_dir, SavedModel path laid out as NAME/1): the session's
    ``tiny_export`` (tests/conftest.py), shared with the serving tests."""
    return tiny_export


@pytest.fixture(scope="session")
def exported_xla(tiny_run, tmp_path_factory):
    """(run_dir, the opt-in XLA export of the tiny run)."""
    from keras_rnnlm.export import export_saved_model

    path = tmp_path_factory.mktemp("served_xla") / "tiny_lm" / "1"
    export_saved_model(tiny_run, str(path), xla=True)
    return tiny_run, str(path)
