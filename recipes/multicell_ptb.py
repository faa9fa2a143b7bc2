"""Cherian, Badola & Padmanabhan, "Multi-cell LSTM Based Neural Language
Model": 2-layer multi-cell LSTM language models on Penn Treebank.

    python recipes/multicell_ptb.py --size small                # 10 cells, max
    python recipes/multicell_ptb.py --size large --cells 4 --strategy mean
    python recipes/multicell_ptb.py --size small --baseline     # plain LSTM
    python recipes/multicell_ptb.py --size small --layers 1 --embedding 300

Recipe options (besides every ``keras-rnnlm train`` option: ``--set``,
``--out``, ``--no-resume``, ``--print-config``, ...):

  --size small|medium|large   200 / 650 / 1500 units, dropout 0.4 / 0.5 /
                              0.65, initial learning rate 1 / 1.2 / 1.2
  --cells M                   memory cells per node (default 10)
  --strategy NAME             mean, weighted, random, max (default),
                              min_max, learnable_max
  --o-thr X                   output-gate threshold of min_max (0.5)
  --initial-cells MODE        zeros (the paper), linspace or random
  --layers N                  hidden layers (paper: 1, 2, 4; default 2)
  --embedding E               embedding size (paper: 300, 600; default =
                              units)
  --baseline                  the plain LSTM trained identically

The presets ``small``, ``medium``, ``large`` (and ``small-lstm``, ...,
``large-4layers``, ``large-emb600``, ...) are the same configurations for
``keras-rnnlm train recipes/multicell_ptb.py --preset NAME``.

Setup (Section 6.3): Zaremba et al.'s architecture (embedding size =
hidden size, dropout on the non-recurrent connections only), unrolled 35
steps, batch 20, states initialised to 0 and carried across batches; the
learning rate annealed by the paper's Algorithm 1 after every epoch on the
validation perplexity (decay 0.5, epochs-to-wait 2, minimum reduction 2
perplexity points, minimum learning rate 1e-4). The paper's plots stop at
~40-45 epochs; we train 40.

Not stated in the paper, our choices: Zaremba et al.'s uniform init
(small 0.1, medium 0.05, large 0.04) and gradient-norm clipping at 5;
plain SGD; validation with 20 streams, test with one stream. Loss scale:
the paper builds on Chainer's PTB example and Zaremba's code, both of which
minimise the cross-entropy *summed* over the 35 steps; the package
minimises the mean, so the equivalent SGD step uses ``learning_rate =
35 * lr``, ``clipnorm = 5 / 35`` and ``min_lr = 35 * 1e-4`` (see
``recipes/zaremba_ptb.py``).

Paper (valid/test perplexity): small MLSTM-LM (10 cells, max) 94.5/89.39,
medium 83.88/79.95, large 80.62/77.12; their plain-LSTM replicate of the
small model 103.216/99.19 and of the large one 81.87/77.85.

Read ``keras_rnnlm/layers/multicell_lstm.py`` before comparing: with the
paper's all-zero initial cells, ``mean``/``max``/``min_max``/``random``
compute exactly a standard LSTM.
"""

import argparse
import sys

from keras_rnnlm.cli import recipe_main
from keras_rnnlm.layers.multicell_lstm import INITIAL_CELLS
from keras_rnnlm.layers.multicell_lstm import STRATEGIES

BPTT = 35
# size -> (units, dropout, lr, init range)
SIZES = {
    "small": (200, 0.4, 1.0, 0.1),
    "medium": (650, 0.5, 1.2, 0.05),
    "large": (1500, 0.65, 1.2, 0.04),
}
PAPER = {  # valid, test
    "small": (94.5, 89.39),
    "medium": (83.88, 79.95),
    "large": (80.62, 77.12),
    "small-lstm": (103.216, 99.19),
    "large-lstm": (81.87, 77.85),
    "large-1layers": (84.50, 80.91),
    "large-4layers": (91.0, 87.2),
    "small-emb300": (127.21, 123.0),
    "small-emb600": (124.51, 121.4),
    "large-emb300": (102.92, 99.0),
    "large-emb600": (95.07, 92.38),
}


def make_preset(
    size="small",
    cells=10,
    strategy="max",
    layers=2,
    embedding=None,
    baseline=False,
    o_thr=0.5,
    initial_cells="zeros",
):
    """The run config (a dict) of one paper configuration."""
    units, dropout, lr, init = SIZES[size]
    name = _name(size, cells, strategy, layers, embedding, baseline)
    if baseline:
        cell, cell_kwargs = "lstm", {}
    else:
        cell = "multicell_lstm"
        cell_kwargs = {"num_cells": int(cells), "strategy": strategy}
        if strategy == "min_max":
            cell_kwargs["output_threshold"] = float(o_thr)
        if initial_cells != "zeros":
            cell_kwargs["initial_cells"] = initial_cells
    return {
        "name": f"multicell_ptb-{name}",
        "data": {
            "corpus": "ptb",
            "batch_size": 20,
            "bptt": BPTT,
            "eval_batch_size": 20,
            "test_batch_size": 1,
        },
        "model": {
            "embedding_dim": int(embedding or units),
            "hidden_sizes": [units] * int(layers),
            "cell": cell,
            "cell_kwargs": cell_kwargs,
            "dropout": dropout,
            "init_range": init,
        },
        "train": {
            "epochs": 40,
            "optimizer": "sgd",
            "learning_rate": lr * BPTT,
            "clipnorm": 5.0 / BPTT,
            "lr_schedule": {
                "name": "plateau_annealing",
                "decay": 0.5,
                "epochs_to_wait": 2,
                "min_reduction": 2.0,
                "min_lr": 1e-4 * BPTT,
            },
            "out_dir": f"runs/multicell_ptb_{name}",
        },
    }


def _name(size, cells, strategy, layers, embedding, baseline):
    if baseline:
        parts = [size, "lstm"]
    else:
        parts = [size]
        if int(cells) != 10:
            parts.append(f"m{cells}")
        if strategy != "max":
            parts.append(strategy)
    if int(layers) != 2:
        parts.append(f"{layers}layers")
    if embedding:
        parts.append(f"emb{embedding}")
    return "-".join(parts)


PRESETS = {}
for _size in SIZES:
    PRESETS[_size] = make_preset(_size)
    PRESETS[f"{_size}-lstm"] = make_preset(_size, baseline=True)
    for _layers in (1, 4):
        PRESETS[f"{_size}-{_layers}layers"] = make_preset(_size, layers=_layers)
    for _emb in (300, 600):
        PRESETS[f"{_size}-emb{_emb}"] = make_preset(_size, embedding=_emb)
DEFAULT_PRESET = "small"


def recipe_parser():
    """The recipe's own options (the rest goes to ``keras-rnnlm train``)."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--size", choices=sorted(SIZES))
    p.add_argument("--cells", type=int, default=10)
    p.add_argument("--strategy", choices=STRATEGIES, default="max")
    p.add_argument("--o-thr", type=float, default=0.5)
    p.add_argument("--initial-cells", choices=INITIAL_CELLS, default="zeros")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--embedding", type=int)
    p.add_argument("--baseline", action="store_true")
    return p


def run(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    args, rest = recipe_parser().parse_known_args(argv)
    if "--preset" in rest or any(a.startswith("--preset=") for a in rest):
        return main(PRESETS, DEFAULT_PRESET, description=__doc__, argv=rest)
    size = args.size or DEFAULT_PRESET
    if args.cells < 1 or args.layers < 1:
        raise SystemExit("--cells and --layers must be positive")
    preset = make_preset(
        size,
        cells=args.cells,
        strategy=args.strategy,
        layers=args.layers,
        embedding=args.embedding,
        baseline=args.baseline,
        o_thr=args.o_thr,
        initial_cells=args.initial_cells,
    )
    presets = {"selected": preset}
    return main(
        presets,
        "selected",
        description=__doc__,
        argv=["--preset", "selected", *rest],
    )


if __name__ == "__main__":
    sys.exit(run())
