"""Keras Tuner search over the multi-cell LSTM: number of memory cells
(the paper's 2-50), selection strategy and the min-max threshold o_thr.

    python recipes/tune_multicell.py --size small --max-trials 12 --epochs 3
    python recipes/tune_multicell.py --tuner grid --strategies max mean \\
        --cells 2 5 10 --set data.max_tokens=100000 --epochs 2

Every trial trains the ``recipes/multicell_ptb.py`` preset of ``--size``
(Algorithm-1 annealing included) for ``--epochs`` epochs with the trial's
hyperparameters and is scored by its best validation perplexity. Writes
into ``--out``: the Keras Tuner project, ``results.csv`` and
``results.md`` (one row per trial, best first) and ``ppl_vs_cells.png``
(validation perplexity against the number of cells, one line per
strategy; the paper's Table 2 is the large model with max pooling, ~40
epochs). Re-running with the same ``--out`` continues the search
(``--overwrite`` starts afresh).
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
KEYS = ["trial", "num_cells", "strategy", "o_thr", "val_ppl", "best_epoch"]
KEYS += ["status"]


def parse_args(argv=None):
    from keras_rnnlm.layers.multicell_lstm import STRATEGIES
    from keras_rnnlm.tuning.base import add_search_arguments
    from keras_rnnlm.tuning.multicell import PAPER_CELLS

    p = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--size", default="small", help="multicell_ptb preset")
    p.add_argument("--cells", type=int, nargs="+", default=list(PAPER_CELLS))
    p.add_argument("--strategies", nargs="+", default=list(STRATEGIES))
    add_search_arguments(p, out="runs/tune_multicell")
    return p.parse_args(argv)


def base_config(size, overrides=(), data_dir=None):
    from keras_rnnlm.tuning.base import base_config as recipe_config

    path = os.path.join(HERE, "multicell_ptb.py")
    return recipe_config(path, size, overrides, data_dir)


def write_results(rows, out):
    """``results.csv``, ``results.md`` and ``ppl_vs_cells.png``."""
    from keras_rnnlm.tuning.base import write_table

    write_table(rows, out, KEYS)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    by_strategy = {}
    for r in rows:
        if r["val_ppl"] is not None:
            by_strategy.setdefault(r["strategy"], {})
            best = by_strategy[r["strategy"]].get(r["num_cells"])
            if best is None or r["val_ppl"] < best:
                by_strategy[r["strategy"]][r["num_cells"]] = r["val_ppl"]
    for strategy, points in sorted(by_strategy.items()):
        xs = sorted(points)
        ax.plot(xs, [points[x] for x in xs], marker="o", label=strategy)
    ax.set_xlabel("memory cells per node")
    ax.set_ylabel("best validation perplexity")
    ax.set_title("Multi-cell LSTM: perplexity vs number of cells")
    if by_strategy:
        ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "ppl_vs_cells.png"), dpi=100)
    plt.close(fig)


def run(argv=None):
    args = parse_args(argv)
    from keras_rnnlm.runs import load_run_corpus
    from keras_rnnlm.tuning.base import is_worker
    from keras_rnnlm.tuning.base import make_tuner
    from keras_rnnlm.tuning.multicell import MultiCellHyperModel
    from keras_rnnlm.tuning.multicell import trial_table

    config = base_config(args.size, args.overrides, args.data_dir)
    corpus = load_run_corpus(config)
    hypermodel = MultiCellHyperModel(
        config, corpus, cells=args.cells, strategies=args.strategies
    )
    tuner = make_tuner(hypermodel, args)
    tuner.search(epochs=args.epochs, verbose=config.train.verbose)
    if is_worker():  # distributed: the chief writes the results
        return []
    rows = trial_table(tuner)
    write_results(rows, args.out)
    for r in rows:
        print(r)
    print(f"Results: {os.path.join(args.out, 'results.md')}")
    return rows


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(HERE, ".."))
    run()
    sys.exit(0)
