"""The one error policy: a user error prints one line and exits 2, from
``keras-rnnlm`` and from recipe scripts alike; ``--debug`` re-raises."""

import errno
import os

import pytest
from user_process import run_as_user

from keras_rnnlm.callbacks import CheckpointWriteError
from keras_rnnlm.cli.errors import run_reporting_errors
from keras_rnnlm.config import ConfigError
from keras_rnnlm.data.errors import ChecksumMismatchError
from keras_rnnlm.data.errors import OOVError

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
RECIPE = os.path.join(ROOT, "recipes", "zaremba_ptb.py")


def _one_line(err):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err, err
    assert len(lines) == 1, err
    return lines[0]


def test_unknown_key_through_a_recipe_script_is_one_line():
    p = run_as_user([RECIPE, "--set", "model.hiden=1", "--print-config"])
    assert p.returncode == 2
    line = _one_line(p.stderr)
    assert line.startswith("zaremba_ptb.py: error:") and "hiden" in line


def test_missing_corpus_through_a_recipe_script_is_one_line(tmp_path):
    p = run_as_user(
        [
            RECIPE,
            "--set",
            f"data.corpus={str(tmp_path / 'nowhere')!r}".replace("'", '"'),
            "--out",
            str(tmp_path / "run"),
        ]
    )
    assert p.returncode == 2
    assert "nowhere" in _one_line(p.stderr)


@pytest.mark.parametrize(
    "error",
    [
        ConfigError("model.hidden_sizes: expected a list"),
        ChecksumMismatchError("ptb.train.txt: sha256 mismatch"),
        OOVError("'zzz' is not in the vocabulary"),
        FileNotFoundError(2, "No such file or directory", "x.txt"),
        # a full or read-only output directory
        CheckpointWriteError("Could not write the checkpoint: disk full"),
        OSError(errno.ENOSPC, "No space left on device", "run/log.csv"),
        OSError(errno.EROFS, "Read-only file system", "run/config.json"),
    ],
)
def test_user_errors_print_one_line(error, capsys):
    def fail():
        raise error

    assert run_reporting_errors("score", fail) == 2
    err = capsys.readouterr().err
    line = _one_line(err)
    assert line.startswith("keras-rnnlm score: error: ")
    assert "KeyError" not in line and not line.endswith("'\"")


def test_debug_reraises():
    def fail():
        raise ConfigError("bad")

    with pytest.raises(ConfigError):
        run_reporting_errors("train", fail, debug=True)


def test_a_bug_keeps_its_traceback():
    def fail():
        raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        run_reporting_errors("train", fail)


def test_every_command_takes_debug():
    from keras_rnnlm.cli import build_parser

    parser = build_parser()
    sub = next(
        a for a in parser._actions if a.dest == "command"
    )  # the subparsers action
    for name, command in sub.choices.items():
        flags = {o for a in command._actions for o in a.option_strings}
        assert "--debug" in flags, name


def test_score_no_bos_on_an_export_is_a_usage_error(monkeypatch):
    """A one-line usage error, not a ValueError traceback."""
    import keras_rnnlm.cli.scoring as scoring_cli
    from keras_rnnlm.cli.errors import UsageError
    from keras_rnnlm.scoring.loading import SavedModelScorer

    class Args:
        model = "an/export/1"
        weights = None
        file = "-"
        no_bos = True
        no_eos = False
        json = False
        document = False
        cache = None
        max_batch_tokens = 4096

    export_scorer = SavedModelScorer.__new__(SavedModelScorer)
    monkeypatch.setattr(
        scoring_cli, "load_scorer", lambda model, **kwargs: export_scorer
    )
    with pytest.raises(UsageError, match="--no-bos"):
        scoring_cli.run_score(Args())


def test_other_os_errors_keep_their_traceback():
    def fail():
        raise OSError(errno.EIO, "Input/output error")

    with pytest.raises(OSError):
        run_reporting_errors("train", fail)
