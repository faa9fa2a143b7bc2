"""recipes/mlstm_ptb.py and recipes/mlstm_text8.py: presets, parameter
counts and a tiny end-to-end run of each."""

import json
import math
import os

import pytest

from keras_rnnlm.config import RunConfig
from keras_rnnlm.models import build_language_model
from keras_rnnlm.recipe import load_recipe

HERE = os.path.dirname(__file__)
PTB = os.path.join(HERE, "..", "recipes", "mlstm_ptb.py")
TEXT8 = os.path.join(HERE, "..", "recipes", "mlstm_text8.py")


def _built_params(preset, vocab):
    cfg = RunConfig.from_dict(preset)
    return build_language_model(cfg.model, vocab, 2).count_params()


def test_ptb_paper_presets_have_292k_parameters():
    recipe = load_recipe(PTB)
    for cell in ("mlstm", "tmlstm", "mgru", "tmgru", "mrnn", "lstm", "gru"):
        name = f"{cell}-paper"
        built = _built_params(recipe.PRESETS[name], 50)
        assert built == recipe.PARAMETERS[name], name
        assert abs(built - 292_000) / 292_000 < 0.005, (name, built)
    large = _built_params(recipe.PRESETS["mgru-large"], 50)
    assert abs(large - 2.1e6) / 2.1e6 < 0.02, large
    p = recipe.PRESETS["mlstm-paper"]
    assert p["data"]["batch_size"] == 32
    assert p["train"]["optimizer"] == "adam"
    assert p["train"]["epochs"] == 10
    assert p["model"]["input_encoding"] == "one_hot"


def test_text8_presets():
    recipe = load_recipe(TEXT8)
    p = recipe.PRESETS["mlstm-paper"]
    assert p["model"]["hidden_sizes"] == [450]
    assert (p["data"]["batch_size"], p["data"]["bptt"]) == (50, 200)
    for cell in ("tmlstm", "mgru", "tmgru"):
        n = recipe.PARAMETERS[f"{cell}-paper"]
        assert abs(n - recipe.PARAMETERS["mlstm-paper"]) < 1500, cell
    large = _built_params(recipe.PRESETS["mgru-large"], 27)
    assert abs(large - 877_000) / 877_000 < 0.01, large


def _run(recipe_path, args, capsys):
    recipe = load_recipe(recipe_path)
    from keras_rnnlm.cli import recipe_main as main

    code = main(
        recipe.PRESETS,
        recipe.DEFAULT_PRESET,
        argv=args,
        axes={"cell": (recipe.CELLS, "mlstm"), "size": (("paper",), "paper")},
    )
    assert code == 0
    return capsys.readouterr().out


def test_cell_and_size_flags_select_the_preset(capsys):
    out = _run(PTB, ["--cell", "tmgru", "--print-config"], capsys)
    cfg = json.loads(out)
    assert cfg["model"]["cell"] == "tmgru"
    assert cfg["name"] == "mlstm_ptb-tmgru-paper"


@pytest.mark.slow
def test_ptb_char_tiny_run_prints_parameters_and_bpc(tmp_path, capsys):
    data = os.environ.get("KERAS_RNNLM_DATA")
    if not data or not os.path.isdir(os.path.join(data, "ptb_char")):
        pytest.skip("PTB-char not available (set KERAS_RNNLM_DATA)")
    out = _run(
        PTB,
        [
            "--cell",
            "mgru",
            "--out",
            str(tmp_path / "run"),
            "--set",
            # 32 streams of one window of 100 (3,232 tokens) in every split
            "data.max_tokens=3300",
            "--set",
            "model.hidden_sizes=[12]",
            "--set",
            "train.epochs=1",
            "--set",
            "train.tensorboard=false",
            "--set",
            "train.verbose=0",
        ],
        capsys,
    )
    built = 12 * 50 + 50 + _cell_params("mgru", 12)
    assert f"{built:,} parameters" in out
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    bpc = results["test"]["bpc"]
    assert math.isfinite(bpc) and 0 < bpc < math.log2(50) + 0.5


def _cell_params(cell, units):
    from keras_rnnlm.models.params import cell_params

    return cell_params(cell, units, 50)


@pytest.mark.slow
def test_text8_recipe_on_small_char_data(tmp_path, capsys):
    d = tmp_path / "chars"
    d.mkdir()
    words = "the quick brown fox jumps over the lazy dog ".split()
    for split, n in (("train", 400), ("valid", 40), ("test", 40)):
        text = "\n".join(
            " ".join(words[i % 9 :] + words[: i % 9]) for i in range(n)
        )
        (d / f"{split}.txt").write_text(text + "\n")
    _run(
        TEXT8,
        [
            "--out",
            str(tmp_path / "run"),
            "--set",
            f"data.corpus={json.dumps(str(d))}",
            "--set",
            'data.level="char"',
            "--set",
            "data.batch_size=4",
            "--set",
            "data.eval_batch_size=4",
            "--set",
            "data.bptt=20",
            "--set",
            "model.hidden_sizes=[16]",
            "--set",
            "train.epochs=2",
            "--set",
            "train.learning_rate=0.01",
            "--set",
            "train.tensorboard=false",
            "--set",
            "train.verbose=0",
        ],
        capsys,
    )
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    # A 2-epoch mLSTM on a repetitive text beats the uniform 5 bits/char.
    assert results["valid"]["bpc"] < math.log2(28) - 1.0
