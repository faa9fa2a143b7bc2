"""The ``keras-rnnlm`` console script (:mod:`keras_rnnlm_launcher`):
``--help`` and a mistyped option answer without loading Keras, TensorFlow
or the package; a verb that runs imports its module and keeps the
library's defaults."""

import json
import os

import pytest
from user_process import run_as_user

from keras_rnnlm.cli.main import command_function
from keras_rnnlm_launcher import build_parser
from keras_rnnlm_launcher import commands
from keras_rnnlm_launcher import main

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
HEAVY = ("keras", "tensorflow", "jax", "keras_rnnlm")


def _verbs():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return sub.choices


def test_the_console_script_is_the_launcher():
    tomllib = pytest.importorskip("tomllib")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    assert scripts["keras-rnnlm"] == "keras_rnnlm_launcher:main"


def test_help_loads_neither_keras_nor_tensorflow():
    """``keras-rnnlm --help``, ``keras-rnnlm VERB --help`` for every verb
    and a bad option, in one fresh process: each exits through argparse
    (0 for help, 2 for the error) with no heavy module imported."""
    argvs = [["--help"], ["train", "--nope"]]
    argvs += [[verb, "--help"] for verb in _verbs()]
    code = (
        "import contextlib, io, json, sys\n"
        "from keras_rnnlm_launcher import main\n"
        "codes = []\n"
        f"for argv in {argvs!r}:\n"
        "    out = io.StringIO()\n"
        "    try:\n"
        "        with contextlib.redirect_stdout(out), "
        "contextlib.redirect_stderr(out):\n"
        "            main(argv)\n"
        "    except SystemExit as e:\n"
        "        codes.append([e.code, 'usage:' in out.getvalue()])\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print(json.dumps({'codes': codes, 'heavy': heavy}))\n"
    )
    p = run_as_user(["-c", code], timeout=60)
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert report["heavy"] == []
    assert report["codes"] == [[0, True], [2, True]] + [[0, True]] * (
        len(argvs) - 2
    )


def test_every_verb_names_a_function_that_runs_it():
    for name, parser in _verbs().items():
        target = parser.get_default("target")
        assert callable(command_function(target)), name


def test_the_values_help_shows_are_the_librarys():
    from keras_rnnlm.data.word2vec import ARCHITECTURES
    from keras_rnnlm.evaluation import dynamic
    from keras_rnnlm.export.saved_model import MAX_BATCH_SIZE
    from keras_rnnlm.export.saved_model import MAX_TOKENS
    from keras_rnnlm.export.warmup import DEFAULT_WARMUP_MAX_LENGTH
    from keras_rnnlm.serving.limits import WARMUP_SECONDS

    assert commands.DYNAMIC_PRESETS == tuple(sorted(dynamic.PRESETS))
    assert commands.DYNAMIC_VARIANTS == tuple(dynamic.VARIANTS)
    assert commands.DYNAMIC_STATISTICS == tuple(dynamic.STATISTICS)
    assert commands.EXPORT_MAX_BATCH_SIZE == MAX_BATCH_SIZE
    assert commands.EXPORT_MAX_TOKENS == MAX_TOKENS
    assert commands.EXPORT_WARMUP_MAX_LENGTH == DEFAULT_WARMUP_MAX_LENGTH
    assert commands.SERVE_WARMUP_SECONDS == WARMUP_SECONDS
    assert commands.WORD2VEC_ARCHITECTURES == tuple(ARCHITECTURES)


def test_a_bad_cache_setting_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["evaluate", "run", "--cache", "nope"])
    assert e.value.code == 2
    assert "argument --cache: Unknown cache preset 'nope'" in (
        capsys.readouterr().err
    )


class Called(Exception):
    """Raised by a stand-in for the library function a verb calls."""


def _run_verb(monkeypatch, module, name, argv):
    """Runs ``keras-rnnlm ARGV`` up to its call of ``module.name`` (replaced
    by a stand-in); returns the keyword arguments of that call."""

    def called(*args, **kwargs):
        raise Called(kwargs)

    monkeypatch.setattr(module, name, called)
    with pytest.raises(Called) as e:
        main(argv)
    return e.value.args[0]


def test_tune_cache_searches_the_librarys_grids(monkeypatch):
    from keras_rnnlm.cli import evaluate
    from keras_rnnlm.evaluation import cache

    kwargs = _run_verb(
        monkeypatch, evaluate, "tune_cache_run", ["tune-cache", "RUN"]
    )
    assert kwargs["windows"] == list(cache.DEFAULT_WINDOWS)
    assert kwargs["thetas"] == list(cache.DEFAULT_THETAS)
    assert kwargs["lambdas"] == list(cache.DEFAULT_LAMBDAS)
    kwargs = _run_verb(
        monkeypatch,
        evaluate,
        "tune_cache_run",
        ["tune-cache", "RUN", "--windows", "7", "--thetas", "0.5"],
    )
    assert kwargs["windows"] == [7] and kwargs["thetas"] == [0.5]


def test_feature_masking_uses_the_papers_probabilities(monkeypatch):
    from keras_rnnlm.analysis.feature_masking import DEFAULT_PS
    from keras_rnnlm.cli import evaluate

    kwargs = _run_verb(
        monkeypatch, evaluate, "feature_masking", ["feature-masking", "RUN"]
    )
    assert kwargs["ps"] == list(DEFAULT_PS)


def test_serve_limits_default_to_the_librarys(monkeypatch, tmp_path):
    from keras_rnnlm.cli import serve
    from keras_rnnlm.serving.limits import Limits

    def limits(**kwargs):
        raise Called(Limits(**kwargs))

    monkeypatch.setattr(serve, "Limits", limits)
    monkeypatch.setattr(serve, "require_tensorflow", lambda feature: None)
    monkeypatch.setattr(serve, "_logging", lambda path: None)
    args = build_parser().parse_args(
        ["serve", str(tmp_path), "--model-name", "lm"]
    )
    with pytest.raises(Called) as e:
        serve.run_serve(args)
    assert e.value.args[0] == Limits()


def test_recipe_help_says_how_to_keep_glibc_malloc(capsys):
    from keras_rnnlm.cli import recipe_main

    with pytest.raises(SystemExit) as e:
        recipe_main({}, "small", "A recipe.", argv=["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "KERAS_RNNLM_MALLOC=default" in " ".join(out.split())


def test_cli_help_says_how_to_keep_glibc_malloc(capsys):
    for argv in (["--help"], ["train", "--help"]):
        with pytest.raises(SystemExit):
            build_parser().parse_args(argv)
        out = " ".join(capsys.readouterr().out.split())
        assert "KERAS_RNNLM_MALLOC=default keeps glibc's defaults" in out
