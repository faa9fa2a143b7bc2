"""A recipe preset's run directory with the builder's untrained weights:
what the benches that time a trained model's commands (generation,
evaluation) run on, since their speed does not depend on the values."""

import os

#: The model each family's benches run: family -> (recipe file stem in
#: ``recipes/``, preset).
FAMILY_PRESETS = {
    "zaremba": ("zaremba_ptb", "small"),
    "awd_lstm_mos": ("awd_lstm_mos_ptb", "cpu"),
    "awd_lstm_doc": ("awd_lstm_doc_ptb", "cpu"),
    "mlstm": ("mlstm_ptb", "mlstm-paper"),
    "multicell": ("multicell_ptb", "small"),
    "awd_lstm": ("awd_lstm_ptb", "cpu"),
}


def with_references(references):
    """``family -> (recipe, preset, reference)`` for each ``family ->
    reference`` of ``references`` (a bench's PyTorch counterpart of each
    family it runs)."""
    return {
        family: (*FAMILY_PRESETS[family], reference)
        for family, reference in references.items()
    }


def write_untrained_run(recipe, preset, run_dir, seed=0):
    """Writes ``run_dir`` (``config.json``, ``vocab.json`` and
    ``best.weights.h5``, the three files every run command reads) for
    ``recipe``'s ``preset``, the model built by the package's builder
    with ``seed``; returns ``(config, corpus, model)``."""
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.recipe import config_from_preset
    from keras_rnnlm.recipe import load_recipe
    from keras_rnnlm.runs import load_run_corpus

    config = config_from_preset(load_recipe(recipe).PRESETS, preset)
    corpus = load_run_corpus(config)
    model = build_language_model(
        config.model, len(corpus.vocab), None, stateful=False, seed=seed
    )
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "config.json"), "w") as f:
        f.write(config.to_json())
    corpus.vocab.save(os.path.join(run_dir, "vocab.json"))
    model.save_weights(os.path.join(run_dir, "best.weights.h5"))
    return config, corpus, model
