"""The CBOW recipe's presets (arXiv:2106.08927, Section 3.1) and their
parameter counts."""

import importlib.util
import os

from keras_rnnlm.config import RunConfig
from keras_rnnlm.models.params import count_params
from keras_rnnlm.presets.cbow_lstm import cbow_preset

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
WT2_VOCAB = 33278


def _recipe():
    path = os.path.join(ROOT, "recipes", "cbow_wt2.py")
    spec = importlib.util.spec_from_file_location("cbow_wt2", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_presets_are_valid_configs_with_the_paper_settings():
    recipe = _recipe()
    assert len(recipe.PRESETS) == 2 * 4 * len(recipe.AXES["level"][0])
    assert recipe.DEFAULT_PRESET in recipe.PRESETS
    for name, preset in recipe.PRESETS.items():
        cfg = RunConfig.from_dict(preset)
        m, d, t = cfg.model, cfg.data, cfg.train
        assert len(m.hidden_sizes) == 1 and m.cell == "lstm"
        assert m.dropout == 0.5 and m.init_range == 0.05
        assert (d.corpus, d.batch_size, d.bptt) == ("wikitext2", 20, 35)
        assert t.epochs == 75 and t.optimizer == "sgd"
        # the summed-over-steps loss: lr 1 and clip 5 on the sum
        assert t.learning_rate == 35.0 and abs(t.clipnorm * 35 - 5) < 1e-12
        assert t.lr_schedule == {
            "name": "zaremba",
            "decay": 0.8,
            "start_epoch": 6,
        }
        if "-none-" in name:
            assert m.context is None
        else:
            assert m.context["window"] == 100 and m.context["alpha"] == 1.05
            assert m.context["dim"] == m.embedding_dim


def test_parameter_counts():
    """Small: 100-d embeddings, 200 LSTM units; large: 280 / 560. With
    the module: a second table (V x dim) and dim more LSTM inputs."""
    v = WT2_VOCAB
    counts = {}
    for size in ("small", "large"):
        for w in ("none", "uniform"):
            cfg = RunConfig.from_dict(cbow_preset(size, w)).model
            counts[size, w] = count_params(cfg, v)
    assert counts["small", "none"] == 10_257_478
    assert counts["small", "uniform"] == 13_665_278
    assert counts["large", "none"] == 29_870_638
    assert counts["large", "uniform"] == 39_815_678
    for size, (e, h) in (("small", (100, 200)), ("large", (280, 560))):
        vanilla = v * e + 4 * h * (e + h + 1) + h * v + v
        assert counts[size, "none"] == vanilla
        assert counts[size, "uniform"] == vanilla + v * e + 4 * h * e
