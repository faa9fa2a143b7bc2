import json
import os

import pytest

from keras_rnnlm.cli import main

RECIPE = os.path.join(
    os.path.dirname(__file__), "..", "..", "recipes", "zaremba_ptb.py"
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


def test_missing_recipe_is_one_line_exit_2(capsys):
    assert main(["train", "no_such_recipe.py"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        "keras-rnnlm train: error: No such file or directory: no_such_recipe.py"
    )


def test_debug_shows_the_traceback():
    with pytest.raises(FileNotFoundError):
        main(["train", "no_such_recipe.py", "--debug"])


def test_config_and_recipe_together_is_a_usage_error(capsys):
    assert main(["train", RECIPE, "--config", "run.json"]) == 2
    assert "--config" in capsys.readouterr().err


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
    # Summed-over-time loss, lr 1, clip 10 == mean loss, lr 35, clip 10/35.
    assert large["train"]["clipnorm"] == pytest.approx(10.0 / 35)
    assert large["train"]["learning_rate"] == 35.0
    assert large["train"]["epochs"] == 55


def test_mean_loss_reparametrisation_equals_summed_loss_update():
    """lr * clip(g_sum, c) == (T * lr) * clip(g_mean, c / T) for SGD."""
    import keras
    import numpy as np

    from keras_rnnlm.config import TrainConfig
    from keras_rnnlm.training.trainer import make_optimizer

    t = 20
    g_mean = np.random.default_rng(0).normal(size=(5,)).astype("float32")
    results = []
    for lr, clip, g in ((1.0, 5.0, g_mean * t), (t * 1.0, 5.0 / t, g_mean)):
        v = keras.Variable(np.zeros(5, "float32"))
        opt = make_optimizer(TrainConfig(learning_rate=lr, clipnorm=clip))
        opt.apply_gradients([(keras.ops.convert_to_tensor(g), v)])
        results.append(keras.ops.convert_to_numpy(v))
    np.testing.assert_allclose(results[0], results[1], rtol=1e-5)


@pytest.mark.parametrize(
    "override",
    ["train.epochs=abc", "train.epochs=2.5", "model.hidden_sizes=32"],
)
def test_a_bad_value_is_one_line_before_anything_is_written(
    override, tmp_path, capsys
):
    """Each is a one-line error (exit 2) before config.json and vocab.json
    are written, not a raw exception in training."""
    out = tmp_path / "run"
    assert main(["train", RECIPE, "--set", override, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("keras-rnnlm train: error: ")
    assert override.split("=")[0] + " must be" in err
    assert not out.exists()
