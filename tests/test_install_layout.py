"""The package imports the same from any working directory.

A clone is usually a folder named ``keras_rnnlm``. With the package at the
clone's top level, Python took that folder (seen from the directory above
it) as a namespace package, and the ``runs/`` folder a recipe writes, or
the top-level ``export/`` folder, stood in for ``keras_rnnlm.runs`` /
``keras_rnnlm.export``: ``ImportError: cannot import name
'atomic_write_text' from 'keras_rnnlm.runs' (unknown location)``. The
package lives under ``src/``, so such folders cannot shadow it.
"""

import os
import shutil

import pytest
from user_process import REPO
from user_process import run_as_user

IMPORTS = (
    "import keras_rnnlm, keras_rnnlm.export; "
    "from keras_rnnlm.runs import atomic_write_text; "
    "print(keras_rnnlm.__file__)"
)


def _above_a_clone(tmp_path):
    """A directory holding a folder named like the clone, with the folders
    a clone grows (a recipe's ``runs/``, ``export/``) and its recipes."""
    clone = tmp_path / "keras_rnnlm"
    for name in ("runs", "export", "runs/zaremba_ptb"):
        (clone / name).mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.join(REPO, "recipes"), clone / "recipes")
    return tmp_path


def _run(args, cwd):
    return run_as_user(args, timeout=600, cwd=cwd, MPLBACKEND="Agg")


@pytest.mark.slow
def test_import_from_the_directory_above_a_clone(tmp_path):
    cwd = _above_a_clone(tmp_path)
    proc = _run(["-c", IMPORTS], cwd)
    assert proc.returncode == 0, proc.stderr[-2000:]
    package = os.path.realpath(os.path.join(REPO, "src", "keras_rnnlm"))
    installed = os.path.realpath(os.path.dirname(proc.stdout.strip()))
    # the editable install's src/ (or an installed copy), never the folder
    assert installed != os.path.realpath(cwd / "keras_rnnlm")
    assert installed == package or "site-packages" in installed


@pytest.mark.slow
def test_a_recipe_runs_from_the_directory_above_a_clone(
    tmp_path, tiny_corpus_dir
):
    cwd = _above_a_clone(tmp_path)
    shutil.copytree(tiny_corpus_dir, cwd / "tiny")
    proc = _run(
        [
            "keras_rnnlm/recipes/zaremba_ptb.py",
            "--preset",
            "small",
            "--set",
            "data.corpus=tiny",
            "--set",
            "train.epochs=1",
            "--set",
            "model.embedding_dim=8",
            "--set",
            "model.hidden_sizes=[8]",
            "--set",
            "train.verbose=0",
        ],
        cwd,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    # the default --out is relative to the working directory, outside the
    # package's import path; importing afterwards still finds the package
    assert (cwd / "runs").is_dir()
    assert any((cwd / "runs").rglob("results.json"))
    again = _run(["-c", IMPORTS], cwd)
    assert again.returncode == 0, again.stderr[-2000:]
