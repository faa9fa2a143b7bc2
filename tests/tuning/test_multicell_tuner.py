import copy
import os

import keras_tuner
import numpy as np
import pytest
from tiny_configs import tiny_overrides

from keras_rnnlm.cli.tune import base_config
from keras_rnnlm.cli.tune import run_multicell_search
from keras_rnnlm.tuning.multicell import MultiCellHyperModel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
RECIPE = os.path.join(ROOT, "recipes", "multicell_ptb.py")


def _tiny_overrides(corpus_dir):
    return tiny_overrides(corpus_dir, learning_rate=8.0)


@pytest.mark.slow
def test_tuner_end_to_end_writes_table_and_plot(tiny_corpus_dir, tmp_path):
    out = tmp_path / "tune"
    argv = ["--max-trials", "2", "--epochs", "1", "--out", str(out)]
    argv += ["--cells", "2", "3", "--strategies", "max", "min_max"]
    for item in _tiny_overrides(tiny_corpus_dir):
        argv += ["--set", item]
    rows = run_multicell_search(RECIPE, argv)
    assert len(rows) == 2
    for r in rows:
        assert r["num_cells"] in (2, 3)
        assert r["strategy"] in ("max", "min_max")
        assert (r["o_thr"] is not None) == (r["strategy"] == "min_max")
        assert 1.0 < r["val_ppl"] < 100.0  # a tiny vocabulary
    assert [r["val_ppl"] for r in rows] == sorted(r["val_ppl"] for r in rows)
    for name in ("results.csv", "results.md", "ppl_vs_cells.png"):
        assert (out / name).stat().st_size > 0
    assert "num_cells" in (out / "results.md").read_text()


def test_hypermodel_space_and_deepcopy(tiny_corpus_dir):
    config = base_config(RECIPE, "small", _tiny_overrides(tiny_corpus_dir))
    from keras_rnnlm.runs import load_run_corpus

    hm = MultiCellHyperModel(
        config, load_run_corpus(config), cells=(2, 50), strategies=["min_max"]
    )
    hp = keras_tuner.HyperParameters()
    trial = hm.trial_config(hp)
    assert trial.model.cell == "multicell_lstm"
    kw = trial.model.cell_kwargs
    assert kw["num_cells"] == 2 and kw["strategy"] == "min_max"
    assert 0.1 <= kw["output_threshold"] <= 0.9
    assert set(hp.values) == {"num_cells", "strategy", "o_thr"}
    copy.deepcopy(hm)  # nothing un-copyable is held
    with pytest.raises(ValueError, match="strategies"):
        MultiCellHyperModel(config, None, strategies=["median"])


def test_trials_start_from_pretrained_embeddings(tiny_corpus_dir, tmp_path):
    """``--pretrained FILE``: every trial's model is built with the
    word2vec vectors in its embedding table (as a training run is)."""
    from gensim.models import KeyedVectors

    from keras_rnnlm.runs import load_run_corpus

    overrides = _tiny_overrides(tiny_corpus_dir)
    config = base_config(RECIPE, "small", overrides)
    corpus = load_run_corpus(config)
    words = corpus.vocab.tokens[:5]
    vectors = np.random.default_rng(0).normal(size=(5, 8)).astype("f4")
    kv = KeyedVectors(vector_size=8)
    kv.add_vectors(words, vectors)
    path = str(tmp_path / "w2v.txt")
    kv.save_word2vec_format(path)

    config = base_config(RECIPE, "small", overrides, pretrained=path)
    hm = MultiCellHyperModel(config, corpus, cells=(2,), strategies=["max"])
    model = hm.build(keras_tuner.HyperParameters())
    table = model.get_layer("embedding").embeddings.numpy()
    np.testing.assert_allclose(table[:5], vectors)
