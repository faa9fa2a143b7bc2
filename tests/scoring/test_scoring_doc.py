"""docs/scoring.md's Python examples run as written, on a Penn Treebank
run directory at the path they name (the small Zaremba preset, random
weights: the examples' calls, vocabulary and claims are checked, not the
figures)."""

import os

import pytest

from keras_rnnlm.config import apply_overrides
from keras_rnnlm.recipe import config_from_preset
from keras_rnnlm.recipe import load_recipe

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
DOC = os.path.join(ROOT, "docs", "scoring.md")
SECTIONS = ("## The `Scorer`", "## Loading `model.keras`")


def python_blocks(path, sections):
    """The indented Python blocks of the sections of a Markdown file
    (blocks with an import or a ``scorer.`` call; shell blocks left
    out)."""
    with open(path) as f:
        lines = f.read().splitlines()
    blocks, current, section = [], [], None
    for line in [*lines, ""]:
        if line.startswith("## "):
            section = line
        if line.startswith("    ") or (current and not line.strip()):
            current.append(line[4:])
            continue
        code = "\n".join(current).strip()
        current = []
        if section and section.startswith(sections) and code:
            first = code.split()[0]
            python = any(w in code for w in ("import ", "scorer.", "state = "))
            shell = first in ("keras-rnnlm", "python", "curl", "docker")
            if python and not shell:
                blocks.append(code)
    return blocks


@pytest.fixture
def ptb_run(tmp_path, monkeypatch):
    """``runs/zaremba_ptb_small`` under the current directory: the small
    preset's config and vocabulary, random weights, and ``model.keras``."""
    data = os.environ.get("KERAS_RNNLM_DATA", "")
    if not os.path.isfile(os.path.join(data, "ptb", "train.txt")):
        pytest.skip("needs Penn Treebank in $KERAS_RNNLM_DATA")
    from run_dirs import write_random_run

    from keras_rnnlm.models import build_language_model

    recipe = load_recipe(os.path.join(ROOT, "recipes", "zaremba_ptb.py"))
    config = config_from_preset(recipe.PRESETS, "small")
    monkeypatch.chdir(tmp_path)
    out = os.path.join("runs", "zaremba_ptb_small")
    config = apply_overrides(config, [f"train.out_dir={out}"])
    run_dir, corpus = write_random_run(config, out)
    model = build_language_model(
        config.model, len(corpus.vocab), None, stateful=False, seed=5
    )
    model.load_weights(os.path.join(run_dir, "best.weights.h5"))
    model.save(os.path.join(run_dir, "model.keras"))
    return run_dir


def test_the_examples_run_as_written(ptb_run):
    blocks = python_blocks(DOC, SECTIONS)
    assert len(blocks) == 3  # the Scorer, streaming, model.keras
    namespace = {}
    for block in blocks:
        exec(compile(block, DOC, "exec"), namespace)
    scorer = namespace["scorer"]
    # every word of the examples is in Penn Treebank's vocabulary
    assert [r.num_oov for r in namespace["results"]] == [0, 0]
    # streaming in segments gives the score of the whole sentence
    first, rest = namespace["first"], namespace["rest"]
    whole = scorer.score("the company said it expects a profit")
    assert first.log10_prob + rest.log10_prob == pytest.approx(whole, abs=1e-4)
    assert namespace["model"].name
