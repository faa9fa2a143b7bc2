"""Training with ``model.context`` (CBOW, arXiv:2106.08927) end to end."""

import math
import os

import keras
import numpy as np
import pytest
from keras import ops

from keras_rnnlm.config import apply_overrides
from keras_rnnlm.data.documents import corpus_idf
from keras_rnnlm.evaluation.static import evaluate_run
from keras_rnnlm.models import build_language_model
from keras_rnnlm.runs import load_run_corpus
from keras_rnnlm.training import train


@pytest.mark.slow
def test_idf_context_trains_and_its_idf_is_saved(tiny_config, capsys):
    cfg = apply_overrides(
        tiny_config,
        [
            "train.epochs=1",
            'model.context={"type": "cbow", "weighting": "idf", '
            '"window": 10, "dim": 8}',
        ],
    )
    results = train(cfg)
    assert math.isfinite(results["valid"]["ppl"])
    out = cfg.train.out_dir
    corpus = load_run_corpus(cfg)
    model = keras.saving.load_model(os.path.join(out, "model.keras"))
    idf = ops.convert_to_numpy(model.get_layer("cbow_context").idf)
    np.testing.assert_allclose(idf, corpus_idf(corpus), rtol=1e-6)
    assert idf.max() > 0  # not the initial ones: set from the corpus
    assert not np.all(idf == 1.0)
    again = evaluate_run(out, splits=("valid",), write=False)
    np.testing.assert_allclose(
        again["valid"]["ppl"], results["valid"]["ppl"], rtol=1e-5
    )
    rebuilt = build_language_model(cfg.model, len(idf), 2, seed=0)
    rebuilt.load_weights(os.path.join(out, "best.weights.h5"))
    np.testing.assert_array_equal(
        ops.convert_to_numpy(rebuilt.get_layer("cbow_context").idf), idf
    )
    # the Table 1 probe on the run: keras-rnnlm context-words
    from keras_rnnlm.cli import main

    text = " ".join(corpus.vocab.decode(corpus.valid[:12]))
    capsys.readouterr()
    assert main(["context-words", out, text, "--top", "3"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3
    assert all(line.split("\t")[0] in corpus.vocab for line in lines)
