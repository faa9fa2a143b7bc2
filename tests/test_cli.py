import json
import os

import pytest

from keras_rnnlm.cli import main

RECIPE = os.path.join(
    os.path.dirname(__file__), "..", "recipes", "zaremba_ptb.py"
)


def test_print_config_with_overrides(capsys):
    code = main(
        [
            "train",
            RECIPE,
            "--preset",
            "medium",
            "--set",
            "train.epochs=2",
            "--print-config",
        ]
    )
    assert code == 0
    cfg = json.loads(capsys.readouterr().out)
    assert cfg["model"]["hidden_sizes"] == [650, 650]
    assert cfg["model"]["dropout"] == 0.5
    assert cfg["train"]["epochs"] == 2
    assert cfg["train"]["lr_schedule"]["start_epoch"] == 6


def test_unknown_override_key_exits_2(capsys):
    code = main(["train", RECIPE, "--set", "model.hiden=1", "--print-config"])
    assert code == 2
    assert "hiden" in capsys.readouterr().err


def test_unknown_preset(capsys):
    assert main(["train", RECIPE, "--preset", "huge", "--print-config"]) == 2


def test_missing_recipe():
    with pytest.raises(FileNotFoundError):
        main(["train", "no_such_recipe.py"])


def test_zaremba_presets_match_paper():
    from keras_rnnlm.recipe import load_recipe

    presets = load_recipe(RECIPE).PRESETS
    small = presets["small"]
    assert small["data"]["bptt"] == 20 and small["model"]["init_range"] == 0.1
    assert small["train"]["epochs"] == 13
    assert small["train"]["lr_schedule"] == {
        "name": "zaremba",
        "decay": 0.5,
        "start_epoch": 4,
    }
    large = presets["large"]
    assert large["model"]["hidden_sizes"] == [1500, 1500]
    assert large["model"]["dropout"] == 0.65
    assert large["train"]["clipnorm"] == 10.0
    assert large["train"]["epochs"] == 55
