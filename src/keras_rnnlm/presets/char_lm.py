"""Character-level language models of Maupomé & Meurs (2019),
"Multiplicative Models for Recurrent Language Modeling", arXiv:1907.00455.

One recurrent layer over one-hot characters, a softmax output, Adam, the
best epoch on validation kept, no other regularisation. Used by
``recipes/mlstm_ptb.py`` and ``recipes/mlstm_text8.py``.
"""

from keras_rnnlm.layers.multiplicative import CELLS as MULTIPLICATIVE
from keras_rnnlm.models.params import char_model_params
from keras_rnnlm.models.params import solve_char_units
from keras_rnnlm.recipe import preset_name

BASELINES = ("lstm", "gru")


def char_lm_preset(
    recipe,
    corpus,
    cell,
    size,
    units,
    intermediate_size,
    alphabet,
    batch_size,
    bptt,
    epochs=10,
    learning_rate=1e-3,
    clipnorm=5.0,
    test_batch_size=1,
):
    """One preset (a nested config dict) and its parameter count.

    Args:
        recipe: recipe name (run name prefix, ``runs/<recipe>/<preset>``).
        corpus: corpus name or path.
        cell: a multiplicative cell name or ``lstm`` / ``gru``.
        size: size label (part of the preset name).
        units: hidden size.
        intermediate_size: ``M`` (``None``: the input size = alphabet).
        alphabet: number of symbols (for the parameter count).
        batch_size, bptt, epochs, learning_rate, clipnorm, test_batch_size:
            the training settings.

    Returns:
        ``(name, preset_dict, parameter_count)``.
    """
    if cell not in MULTIPLICATIVE and cell not in BASELINES:
        raise ValueError(
            f"Unknown cell {cell!r}; known {sorted(MULTIPLICATIVE)} and "
            f"{BASELINES}"
        )
    cell_kwargs = {}
    if cell in MULTIPLICATIVE and intermediate_size is not None:
        cell_kwargs["intermediate_size"] = intermediate_size
    if cell == "gru":
        cell_kwargs["reset_after"] = False  # W_h (r * h), eq. 19
    name = preset_name(cell=cell, size=size)
    preset = {
        "name": f"{recipe}-{name}",
        "data": {
            "corpus": corpus,
            "batch_size": batch_size,
            "bptt": bptt,
            "eval_batch_size": batch_size,
            "test_batch_size": test_batch_size,
        },
        "model": {
            "input_encoding": "one_hot",
            "hidden_sizes": [units],
            "cell": cell,
            "cell_kwargs": cell_kwargs,
            "head": "softmax",
            "init_range": None,
        },
        "train": {
            "epochs": epochs,
            "optimizer": "adam",
            "learning_rate": learning_rate,
            "clipnorm": clipnorm,
            "out_dir": f"runs/{recipe}/{name}",
        },
    }
    params = char_model_params(cell, units, alphabet, intermediate_size)
    return name, preset, params


def char_lm_presets(recipe, corpus, cells, sizes, alphabet, **training):
    """Presets for every (cell, size).

    Args:
        sizes: ``{size: spec}`` where ``spec`` is ``{"units": int}`` (a
            fixed hidden size), ``{"params": int}`` (the hidden size solved
            so the model has that many parameters, the paper's way of
            matching models), optionally with ``"intermediate_size"`` and
            ``"units_by_cell"`` (fixed sizes for some cells).
        **training: passed to :func:`char_lm_preset`.

    Returns:
        ``(presets, parameter_counts)`` dicts keyed by preset name.
    """
    presets, counts = {}, {}
    for size, spec in sizes.items():
        inter = spec.get("intermediate_size")
        for cell in cells:
            units = spec.get("units_by_cell", {}).get(cell) or spec.get("units")
            if units is None:
                units = solve_char_units(cell, spec["params"], alphabet, inter)
            name, preset, count = char_lm_preset(
                recipe,
                corpus,
                cell,
                size,
                units,
                inter,
                alphabet,
                **training,
            )
            presets[name], counts[name] = preset, count
    return presets, counts
