"""The messages of a user's mistakes: one line each, one wording for a
path that does not exist, and the command-line flag that fixes it."""

import os

import pytest
from user_process import run_as_user

from keras_rnnlm.cli import main

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
RECIPE = os.path.join(ROOT, "recipes", "zaremba_ptb.py")


def _error(capsys):
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, err
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "{missing}"],
        ["evaluate", "{missing}"],
        ["score", "{missing}"],
        ["export", "{missing}", "{out}"],
        ["train", RECIPE, "--set", 'data.corpus="{missing}"'],
    ],
    ids=["recipe", "run", "model", "export", "corpus"],
)
def test_a_path_that_does_not_exist_has_one_wording(argv, tmp_path, capsys):
    missing = str(tmp_path / "no" / "such")
    argv = [
        a.format(missing=missing, out=tmp_path / "models" / "1") for a in argv
    ]
    argv += ["--out", str(tmp_path / "run")] if argv[0] == "train" else []
    assert main(argv) == 2
    line = _error(capsys)
    assert line.endswith(f": error: No such file or directory: {missing}")


def test_scoring_a_serving_base_directory_names_a_version(tmp_path, capsys):
    for version in ("1", "2"):
        (tmp_path / "ptb_lm" / version).mkdir(parents=True)
        (tmp_path / "ptb_lm" / version / "saved_model.pb").write_bytes(b"")
    base = str(tmp_path / "ptb_lm")
    assert main(["score", base]) == 2
    line = _error(capsys)
    assert "serving base directory" in line
    assert line.endswith(f"e.g. {os.path.join(base, '2')}")


def test_scoring_a_run_without_weights_names_weights(
    tiny_run, tmp_path, capsys
):
    run = tmp_path / "unfinished"
    run.mkdir()
    for name in ("config.json", "vocab.json"):
        (run / name).write_bytes(
            open(os.path.join(tiny_run, name), "rb").read()
        )
    assert main(["score", str(run)]) == 2
    line = _error(capsys)
    assert "has no best.weights.h5 yet" in line and "--weights FILE" in line
    assert "weights=" not in line


def test_exporting_over_an_export_names_overwrite(tiny_run, tmp_path, capsys):
    out = tmp_path / "models" / "ptb_lm" / "1"
    out.mkdir(parents=True)
    assert main(["export", tiny_run, str(out), "--no-warmup-file"]) == 2
    line = _error(capsys)
    assert "--overwrite" in line and "overwrite=True" in line
    assert line.index("--overwrite") < line.index("overwrite=True")


def test_an_out_folder_that_is_a_file_names_the_flag(tmp_path, capsys):
    taken = tmp_path / "taken"
    taken.write_text("")
    assert main(["feature-masking", "run", "--out", str(taken)]) == 2
    assert _error(capsys).endswith(
        f"--out {taken} is a file: give a folder (new or existing)"
    )
    argv = ["train", RECIPE, "--out", str(taken), "--set", "train.epochs=1"]
    assert main(argv) == 2
    line = _error(capsys)
    assert str(taken) in line and "--out" in line and "Errno" not in line


def test_the_missing_corpus_error_is_one_line_naming_the_fix(tmp_path):
    """The registered corpus nowhere: one line on stderr (the download
    attempts stop at the first file), naming --data-dir and
    $KERAS_RNNLM_DATA."""
    empty = tmp_path / "empty"
    empty.mkdir()
    p = run_as_user(
        [RECIPE, "--out", str(tmp_path / "run"), "--set", "train.epochs=1"],
        KERAS_RNNLM_DATA=str(empty),
        KERAS_HOME=str(tmp_path / "keras_home"),
    )
    assert p.returncode == 2
    lines = [line for line in p.stderr.splitlines() if "error:" in line]
    assert len(lines) == 1, p.stderr
    assert "Traceback" not in p.stderr
    line = lines[0]
    assert line.startswith("zaremba_ptb.py: error: Corpus 'ptb' not found")
    assert "--data-dir" in line and "$KERAS_RNNLM_DATA" in line
    assert str(empty) in line
    assert p.stdout.count("Downloading data from") <= 2
