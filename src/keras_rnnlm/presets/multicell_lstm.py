"""Presets of Cherian, Badola & Padmanabhan, "Multi-cell LSTM Based Neural
Language Model", arXiv:1811.06477: 2-layer multi-cell LSTM language models
on Penn Treebank (``recipes/multicell_ptb.py``).

Setup (Section 6.3): Zaremba et al.'s architecture (embedding size =
hidden size, dropout on the non-recurrent connections only), unrolled 35
steps, batch 20, states initialised to 0 and carried across batches; the
learning rate annealed by the paper's Algorithm 1 after every epoch on
the validation perplexity (``plateau_annealing``: decay 0.5,
epochs-to-wait 2, minimum reduction 2 perplexity points, minimum learning
rate 1e-4). The paper's plots stop at ~40-45 epochs; we train 40.

Not stated in the paper, our choices: Zaremba et al.'s uniform init
(small 0.1, medium 0.05, large 0.04) and gradient-norm clipping at 5;
plain SGD; validation with 20 streams, test with one stream.

Loss scale: the paper builds on Chainer's PTB example and Zaremba's code,
both of which minimise the cross-entropy *summed* over the 35 steps; the
package minimises the mean, so the equivalent SGD step uses
``learning_rate = 35 * lr``, ``clipnorm = 5 / 35`` and ``min_lr = 35 *
1e-4`` (see ``recipes/zaremba_ptb.py``).

Preset names: the size (``small``, ``medium``, ``large``: the paper's
main model, 10 memory cells per node, ``max`` selection, 2 layers), or
the size and a variant (:data:`VARIANTS`): ``small-lstm`` (the plain LSTM
trained identically), ``large-1layers`` / ``large-4layers`` (1 or 4
hidden layers), ``small-emb300`` / ``small-emb600`` (embedding size 300
or 600).
"""

from keras_rnnlm.presets.merge import merge
from keras_rnnlm.recipe import preset_name

BPTT = 35
#: size -> (hidden units, dropout, initial learning rate, init range).
SIZES = {
    "small": (200, 0.4, 1.0, 0.1),
    "medium": (650, 0.5, 1.2, 0.05),
    "large": (1500, 0.65, 1.2, 0.04),
}
#: variant -> what it changes in the size's main model (``None``: the
#: main model itself).
VARIANTS = {
    None: {},
    "lstm": {"baseline": True},
    "1layers": {"layers": 1},
    "4layers": {"layers": 4},
    "emb300": {"embedding": 300},
    "emb600": {"embedding": 600},
}
#: The named variants (``recipes/multicell_ptb.py --variant``).
VARIANT_NAMES = tuple(v for v in VARIANTS if v is not None)
#: The paper's multi-cell node: 10 memory cells, ``max`` selection.
MULTICELL = {
    "model": {
        "cell": "multicell_lstm",
        "cell_kwargs": {"num_cells": 10, "strategy": "max"},
    }
}
#: The plain-LSTM baseline, trained as the multi-cell models.
LSTM = {"model": {"cell": "lstm", "cell_kwargs": {}}}

BASE = {
    "data": {
        "corpus": "ptb",
        "batch_size": 20,
        "bptt": BPTT,
        "eval_batch_size": 20,
        "test_batch_size": 1,
    },
    "train": {
        "epochs": 40,
        "optimizer": "sgd",
        "clipnorm": 5.0 / BPTT,
        "lr_schedule": {
            "name": "plateau_annealing",
            "decay": 0.5,
            "epochs_to_wait": 2,
            "min_reduction": 2.0,
            "min_lr": 1e-4 * BPTT,
        },
    },
}


def multicell_preset(size, variant=None):
    """One configuration of the paper (a nested config dict).

    Args:
        size: ``small``, ``medium`` or ``large`` (:data:`SIZES`).
        variant: ``None`` (the main model) or a key of :data:`VARIANTS`.
    """
    units, dropout, lr, init = SIZES[size]
    change = VARIANTS[variant]
    name = preset_name(size=size, variant=variant)
    return merge(
        BASE,
        LSTM if change.get("baseline") else MULTICELL,
        {
            "name": f"multicell_ptb-{name}",
            "model": {
                "embedding_dim": change.get("embedding", units),
                "hidden_sizes": [units] * change.get("layers", 2),
                "dropout": dropout,
                "init_range": init,
            },
            "train": {
                "learning_rate": lr * BPTT,
                "out_dir": f"runs/multicell_ptb_{name}",
            },
        },
    )


def multicell_presets():
    """Every preset of ``recipes/multicell_ptb.py``: each size alone and
    with each variant."""
    return {
        preset_name(size=size, variant=variant): multicell_preset(size, variant)
        for size in SIZES
        for variant in VARIANTS
    }
