"""What ``train`` tells the user: every option has help text, recipes list
their presets, conflicting options are refused, and an interrupted run
prints one line naming its checkpoint and the command that resumes it
(the command the user ran)."""

import argparse
import glob
import os
import signal
import sys

import pytest

from keras_rnnlm.callbacks import TrainingInterrupted
from keras_rnnlm.cli.errors import invoked_command
from keras_rnnlm.cli.errors import resume_command
from keras_rnnlm.cli.errors import run_reporting_errors
from keras_rnnlm.cli.train import recipe_main
from keras_rnnlm.cli.train import recipe_parser
from keras_rnnlm.recipe import load_recipe
from keras_rnnlm_launcher.commands import build_parser

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
RECIPES = sorted(glob.glob(os.path.join(ROOT, "recipes", "*.py")))
TRAINING_RECIPES = [
    path for path in RECIPES if "recipe_main" in open(path).read()
]


def _options_without_help(parser, name):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for verb, sub in action.choices.items():
                yield from _options_without_help(sub, f"{name} {verb}")
        elif not action.help:
            yield f"{name} {'/'.join(action.option_strings) or action.dest}"


def test_every_option_of_every_command_has_help():
    from keras_rnnlm.cli.tune import major_minor_parser
    from keras_rnnlm.cli.tune import multicell_parser

    assert list(_options_without_help(build_parser(), "keras-rnnlm")) == []
    for parser in (multicell_parser(), major_minor_parser()):
        assert list(_options_without_help(parser, "tune")) == []


@pytest.mark.parametrize(
    "path",
    TRAINING_RECIPES,
    ids=[os.path.basename(p) for p in TRAINING_RECIPES],
)
def test_every_recipe_lists_its_presets_and_helps_every_option(path, capsys):
    module = load_recipe(path)
    axes = getattr(module, "AXES", None)
    parser = recipe_parser(
        module.PRESETS, module.DEFAULT_PRESET, module.__doc__, axes
    )
    assert list(_options_without_help(parser, path)) == []
    with pytest.raises(SystemExit):
        parser.parse_args(["--help"])
    out = capsys.readouterr().out
    for name in module.PRESETS:
        assert name in out.split() or f"{name}," in out.split(), name
    assert f"(default: {module.DEFAULT_PRESET})" in " ".join(out.split())


def test_a_preset_and_an_axis_together_are_refused(capsys):
    module = load_recipe(os.path.join(ROOT, "recipes", "zaremba_ptb.py"))
    code = recipe_main(
        module.PRESETS,
        module.DEFAULT_PRESET,
        argv=["--preset", "small", "--size", "medium", "--print-config"],
        axes=module.AXES,
    )
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert "--preset small and --size medium" in err


def test_an_axis_alone_chooses_the_preset(capsys):
    module = load_recipe(os.path.join(ROOT, "recipes", "zaremba_ptb.py"))
    code = recipe_main(
        module.PRESETS,
        module.DEFAULT_PRESET,
        argv=["--size", "medium", "--print-config"],
        axes=module.AXES,
    )
    assert code == 0
    assert '"hidden_sizes": [\n      650' in capsys.readouterr().out


@pytest.mark.parametrize(
    "orig, argv, expected",
    [
        (  # a recipe script
            ["python3", "recipes/mlstm_ptb.py", "--no-resume"],
            ["recipes/mlstm_ptb.py", "--no-resume"],
            "python3 recipes/mlstm_ptb.py",
        ),
        (  # python -m
            [
                "python",
                "-m",
                "keras_rnnlm.cli",
                "train",
                "r.py",
                "--out",
                "a b",
            ],
            ["/x/keras_rnnlm/cli/__main__.py", "train", "r.py", "--out", "a b"],
            "python -m keras_rnnlm.cli train r.py --out 'a b'",
        ),
    ],
)
def test_the_resume_command_is_the_command_the_user_ran(
    monkeypatch, orig, argv, expected
):
    monkeypatch.setattr(sys, "orig_argv", orig)
    monkeypatch.setattr(sys, "argv", argv)
    assert resume_command(argv[1:], ["keras-rnnlm"]) == expected


def test_the_console_script_is_named_as_typed(monkeypatch, tmp_path):
    script = tmp_path / "keras-rnnlm"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path), prepend=os.pathsep)
    argv = [str(script), "train", "r.py"]
    monkeypatch.setattr(sys, "orig_argv", ["/venv/bin/python", *argv])
    monkeypatch.setattr(sys, "argv", argv)
    assert invoked_command(argv[1:], []) == ["keras-rnnlm", "train", "r.py"]
    # called from Python with other arguments: the given program
    assert invoked_command(["x"], ["keras-rnnlm"]) == ["keras-rnnlm", "x"]


def test_an_interruption_is_one_line_with_the_checkpoint_and_the_resume(
    capsys, tmp_path
):
    def interrupted():
        raise TrainingInterrupted(
            signal.SIGINT, tmp_path, str(tmp_path / "checkpoint"), 2, 133, 1568
        )

    code = run_reporting_errors(
        "train", interrupted, prog="mlstm_ptb.py", resume="python r.py"
    )
    assert code == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("mlstm_ptb.py: interrupted by SIGINT: checkpoint ")
    assert str(tmp_path / "checkpoint") in err
    assert "epoch 2, batch 133/1568" in err
    assert err.strip().endswith("; resume with: python r.py")

    def terminated():
        raise TrainingInterrupted(signal.SIGTERM, tmp_path, None, 1)

    assert run_reporting_errors("train", terminated, resume="x") == 143
    err = capsys.readouterr().err
    assert "no checkpoint yet" in err and "start again with: x" in err


def test_print_config_leaves_out_what_the_model_ignores(capsys):
    import json

    module = load_recipe(os.path.join(ROOT, "recipes", "mlstm_ptb.py"))
    code = recipe_main(
        module.PRESETS,
        module.DEFAULT_PRESET,
        argv=["--print-config"],
        axes=module.AXES,
    )
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["model"]["input_encoding"] == "one_hot"
    assert "embedding_dim" not in printed["model"]
