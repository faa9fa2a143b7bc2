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
import csv
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args(argv=None):
    from keras_rnnlm.layers.multicell_lstm import STRATEGIES
    from keras_rnnlm.tuning.multicell import PAPER_CELLS

    p = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--size", default="small", help="multicell_ptb preset")
    p.add_argument("--cells", type=int, nargs="+", default=list(PAPER_CELLS))
    p.add_argument("--strategies", nargs="+", default=list(STRATEGIES))
    p.add_argument("--tuner", choices=("random", "grid"), default="random")
    p.add_argument("--max-trials", type=int, default=10)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--out", default="runs/tune_multicell")
    p.add_argument("--overwrite", action="store_true")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override a config value of the base preset",
    )
    p.add_argument("--data-dir")
    return p.parse_args(argv)


def base_config(size, overrides=(), data_dir=None):
    from keras_rnnlm.recipe import config_from_preset
    from keras_rnnlm.recipe import load_recipe

    recipe = load_recipe(os.path.join(HERE, "multicell_ptb.py"))
    overrides = list(overrides)
    if data_dir:
        overrides.append(f"data.data_dir={data_dir}")
    return config_from_preset(recipe.PRESETS, size, overrides)


def write_results(rows, out):
    """``results.csv``, ``results.md`` and ``ppl_vs_cells.png``."""
    keys = ["trial", "num_cells", "strategy", "o_thr", "val_ppl"]
    keys += ["best_epoch", "status"]
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)
    lines = ["| " + " | ".join(keys) + " |", "|" + " --- |" * len(keys)]
    for r in rows:
        cells = []
        for k in keys:
            v = r[k]
            cells.append(f"{v:.2f}" if isinstance(v, float) else str(v or ""))
        lines.append("| " + " | ".join(cells) + " |")
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")

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
    import keras_tuner

    from keras_rnnlm.training.trainer import load_run_corpus
    from keras_rnnlm.tuning.multicell import OBJECTIVE
    from keras_rnnlm.tuning.multicell import MultiCellHyperModel
    from keras_rnnlm.tuning.multicell import trial_table

    config = base_config(args.size, args.overrides, args.data_dir)
    corpus = load_run_corpus(config)
    hypermodel = MultiCellHyperModel(
        config, corpus, cells=args.cells, strategies=args.strategies
    )
    os.makedirs(args.out, exist_ok=True)
    common = {
        "objective": OBJECTIVE,
        "max_trials": args.max_trials,
        "seed": args.seed,
        "directory": args.out,
        "project_name": "search",
        "overwrite": args.overwrite,
    }
    tuner_cls = (
        keras_tuner.GridSearch
        if args.tuner == "grid"
        else keras_tuner.RandomSearch
    )
    tuner = tuner_cls(hypermodel, **common)
    tuner.search(epochs=args.epochs, verbose=config.train.verbose)
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
