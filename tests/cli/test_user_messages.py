"""The messages of a user's mistakes: one line each, one wording for a
path that does not exist, and the command-line flag that fixes it."""

import os
import shutil

import pytest
from tiny_configs import tiny_overrides
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


def _corpus_with(tmp_path, tiny_corpus_dir, split, content):
    """The tiny corpus with ``split`` (``valid.txt``, ...) replaced by
    ``content`` (str or bytes)."""
    root = tmp_path / "corpus"
    shutil.copytree(tiny_corpus_dir, root)
    if isinstance(content, bytes):
        (root / split).write_bytes(content)
    else:
        (root / split).write_text(content)
    return root


def _tiny_train(corpus, out, *sets):
    argv = ["train", RECIPE, "--out", str(out)]
    for item in [*tiny_overrides(corpus, 0.01), "train.epochs=1", *sets]:
        argv += ["--set", item]
    return main(argv)


@pytest.mark.parametrize(
    "split, content, expects",
    [
        ("valid.txt", "", "The valid split of '{root}' ({root}/valid.txt) is "),
        ("test.txt", "", "The test split of '{root}' ({root}/test.txt) is e"),
        (
            "valid.txt",
            "a b c",
            "data.eval_batch_size=2 is too large for the valid split of "
            "'{root}' ({root}/valid.txt): 2 streams of one data.bptt=8 "
            "window each need 2 x 9 = 18 tokens, and it has 4;",
        ),
        (
            "test.txt",
            "a b c",
            "data.test_batch_size=1 is too large for the test split",
        ),
        (
            "valid.txt",
            b"the cat\nsees the caf\xe9\n",
            "{root}/valid.txt is not UTF-8 text: line 2 (byte offset 20) has "
            "byte 0xe9",
        ),
    ],
    ids=["empty-valid", "empty-test", "short-valid", "short-test", "latin-1"],
)
def test_a_bad_split_is_one_line_before_anything_is_written(
    split, content, expects, tmp_path, tiny_corpus_dir, capsys
):
    """An empty, too short or undecodable split is refused before the run
    directory is made: a short valid.txt was found only after a whole
    epoch of training (a ValueError traceback), an empty test.txt after
    every epoch, a Latin-1 file without its name."""
    root = _corpus_with(tmp_path, tiny_corpus_dir, split, content)
    out = tmp_path / "run"
    assert _tiny_train(root, out) == 2
    line = _error(capsys)
    assert line.startswith("keras-rnnlm train: error: ")
    assert expects.format(root=root) in line
    assert not out.exists()


@pytest.mark.parametrize(
    "override, expects",
    [
        (
            "model.cell=foo",
            "--set model.cell: unknown recurrent layer 'foo'; known: gru, ",
        ),
        (
            'model.cell_kwargs={"bogus": 1}',
            "--set model.cell_kwargs: 'bogus' is not an argument of the "
            "'lstm' layer; its arguments: activation, ",
        ),
        (
            'model.cell_kwargs={"units": 5}',
            "--set model.cell_kwargs: 'units' of the 'lstm' layers is set by "
            "the builder (from model.hidden_sizes)",
        ),
        (
            "data.batch_size=100000",
            "--set data.batch_size=100000 is too large for the train split",
        ),
    ],
    ids=["cell", "unknown-kwarg", "builder-kwarg", "batch-size"],
)
def test_a_bad_set_value_names_the_set_key_before_anything_is_written(
    override, expects, tmp_path, tiny_corpus_dir, capsys
):
    """Each was a traceback (an unknown cell or keyword argument when the
    model was built, a batch of streams shorter than one window after
    config.json and vocab.json were written)."""
    out = tmp_path / "run"
    assert _tiny_train(tiny_corpus_dir, out, override) == 2
    line = _error(capsys)
    assert line.startswith(f"keras-rnnlm train: error: {expects}")
    assert not out.exists()


def test_a_key_not_given_with_set_is_named_without_it(
    tmp_path, tiny_corpus_dir, capsys
):
    """A value of the recipe itself (here the preset's eval batch size
    of 20, too large for the tiny valid split at a window of 40) names its
    key alone."""
    out = tmp_path / "run"
    argv = ["train", RECIPE, "--out", str(out)]
    sets = [f"data.corpus={tiny_corpus_dir}", "data.level=word", "data.bptt=40"]
    for item in sets:
        argv += ["--set", item]
    assert main(argv) == 2
    line = _error(capsys)
    assert line.startswith(
        "keras-rnnlm train: error: data.eval_batch_size=20 is too large for "
        "the valid split"
    )
    assert not out.exists()
