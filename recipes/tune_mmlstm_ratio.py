"""Keras Tuner search over Major-Minor LSTM ratios (Table IX, Fig. 6) and
plain LSTM hidden sizes (Figs. 3 and 4) of the Major-Minor LSTM paper.

    python recipes/tune_mmlstm_ratio.py --preset cpu --max-trials 12 --epochs 3
    # Table IX / Fig. 6: one shared ratio, first two layers solved to the
    # AWD-LSTM's 24.2M parameters (the third feeds the tied decoder):
    python recipes/tune_mmlstm_ratio.py --preset ratio_10_0 --shared \\
        --budget base --tuner grid --epochs 300
    # Figs. 3/4: AWD-LSTM layer 1 from 200 to 1200, or 0.6c to 1.2c:
    python recipes/tune_mmlstm_ratio.py --search hidden --recipe awd_lstm_ptb \\
        --preset paper --layers 1 --sizes 200 400 600 800 1000 1200
    python recipes/tune_mmlstm_ratio.py --search hidden --recipe awd_lstm_ptb \\
        --preset paper --layers 2 --factors 0.6 0.7 0.8 0.9 1.0 1.1 1.2

``--search ratio`` (default) searches the Major proportion of every layer
(``--layers``: which ones; deciles 0.5-1.0, 1.0 = a plain LSTM layer), or
one shared proportion (``--shared``), on a ``recipes/mmlstm_ptb.py``
preset (``--recipe``/``--preset``; an LSTM preset works too, its layers
become MMLSTM layers). ``--budget base|N|none``: keep the parameter count
at the base preset's (``base``, default) or at N by solving the total size
of ``--solve-layers`` (default: every layer not feeding a tied decoder),
a multiple of ``--size-step``, as Table IX does; ``none`` keeps the sizes
(``--sizes``: candidate sizes of the unsolved layers). ``--search
hidden`` searches the sizes of ``--layers`` of a plain model (``--sizes``
or ``--factors`` of the base size c).

Every trial trains the preset for ``--epochs`` epochs (the epoch budget;
fixed BPTT windows, no NT-ASGD or finetuning) and is scored by its best
validation perplexity; ``--max-trials`` is the trial budget. Optional
knobs: ``--learning-rates`` and ``--bptts`` (the latter is a fit-time
hyperparameter). Writes into ``--out``: the Keras Tuner project,
``results.csv`` and ``results.md`` (one row per trial, best first, with
the solved sizes and parameter counts) and ``ppl_vs_ratio.png`` (or
``ppl_vs_size.png``): validation perplexity against the Major proportion
of each searched layer (the size for ``hidden``), every trial a point and
the best per value a line. Re-running with the same ``--out`` continues
the search (``--overwrite`` starts afresh).

Distributed search (Keras Tuner's chief/worker mode; gRPC, the
``grpcio`` package that keras-tuner requires): start the same command
once per process, with the same ``--out`` on a shared file system, and
three environment variables: ``KERASTUNER_ORACLE_IP`` and
``KERASTUNER_ORACLE_PORT``, where the chief serves the oracle (the same
for everyone), and ``KERASTUNER_TUNER_ID``: ``chief`` for the one process
that runs the oracle (it trains nothing and writes the results when the
trial budget is spent), a distinct id per worker (``tuner0``,
``tuner1``, ...; each runs trials, one per accelerator)::

    export KERASTUNER_ORACLE_IP=10.0.0.1 KERASTUNER_ORACLE_PORT=8000
    KERASTUNER_TUNER_ID=chief  python recipes/tune_mmlstm_ratio.py ARGS &
    KERASTUNER_TUNER_ID=tuner0 CUDA_VISIBLE_DEVICES=0 \\
        python recipes/tune_mmlstm_ratio.py ARGS &
    KERASTUNER_TUNER_ID=tuner1 CUDA_VISIBLE_DEVICES=1 \\
        python recipes/tune_mmlstm_ratio.py ARGS &

Only the chief honours ``--overwrite``; workers wait for the chief (they
may start first) and exit when the oracle has no trial left.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_RECIPE = {"ratio": "mmlstm_ptb", "hidden": "awd_lstm_ptb"}


def parse_args(argv=None):
    from keras_rnnlm.tuning.base import add_search_arguments
    from keras_rnnlm.tuning.major_minor import DECILES

    p = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--search", choices=("ratio", "hidden"), default="ratio")
    p.add_argument(
        "--recipe",
        help="base recipe: a name in recipes/ or a path (default "
        "mmlstm_ptb; awd_lstm_ptb for --search hidden)",
    )
    p.add_argument("--preset", default="cpu", help="preset of the recipe")
    p.add_argument(
        "--layers",
        type=int,
        nargs="+",
        help="searched layers, from 1 (ratio: all; hidden: 1)",
    )
    p.add_argument(
        "--proportions", type=float, nargs="+", default=list(DECILES)
    )
    p.add_argument(
        "--shared", action="store_true", help="one proportion for all"
    )
    p.add_argument(
        "--budget",
        default="base",
        help="parameter budget: base, none or a number of parameters",
    )
    p.add_argument("--solve-layers", type=int, nargs="+")
    p.add_argument("--size-step", type=int, default=10)
    p.add_argument("--sizes", type=int, nargs="+", help="candidate sizes")
    p.add_argument(
        "--factors", type=float, nargs="+", help="hidden: multiples of c"
    )
    p.add_argument("--learning-rates", type=float, nargs="+")
    p.add_argument("--bptts", type=int, nargs="+")
    add_search_arguments(p, out="runs/tune_mmlstm_ratio")
    return p.parse_args(argv)


def recipe_path(name):
    if os.path.exists(name):
        return name
    return os.path.join(HERE, f"{name}.py")


def _budget(text):
    if text in (None, "none"):
        return None
    if text == "base":
        return text
    return int(float(text))


def make_hypermodel(args, config, corpus):
    from keras_rnnlm.tuning.major_minor import HiddenSizeHyperModel
    from keras_rnnlm.tuning.major_minor import MajorMinorHyperModel

    knobs = {"bptts": args.bptts, "learning_rates": args.learning_rates}
    if args.search == "hidden":
        kw = {"layers": args.layers or (1,), "factors": args.factors}
        if args.sizes:
            kw["sizes"] = args.sizes
        return HiddenSizeHyperModel(config, corpus, **kw, **knobs)
    return MajorMinorHyperModel(
        config,
        corpus,
        proportions=args.proportions,
        layers=args.layers,
        shared_proportion=args.shared,
        size_choices=args.sizes,
        param_budget=_budget(args.budget),
        solve_layers=args.solve_layers,
        size_step=args.size_step,
        **knobs,
    )


def table_keys(rows, search):
    first = ["trial"]
    last = ["hidden_sizes", "params", "learning_rate", "bptt", "val_ppl"]
    last += ["best_epoch", "status"]
    prefix = "major_proportion_" if search == "ratio" else "size_"
    middle = sorted(
        {k for r in rows for k in r if k.startswith(prefix)},
        key=lambda k: int(k[len(prefix) :]),
    )
    present = {k for r in rows for k in r}
    return first + middle + [k for k in last if k in present]


def plot(rows, out, search, searched):
    """Validation perplexity against each searched layer's value."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if search == "ratio":
        prefix, xlabel = "major_proportion_", "Major proportion"
        name, title = "ppl_vs_ratio.png", "MMLSTM: perplexity vs Major ratio"
    else:
        prefix, xlabel = "size_", "hidden size"
        name, title = "ppl_vs_size.png", "LSTM: perplexity vs hidden size"
    done = [r for r in rows if r["val_ppl"] is not None]
    n = max(len(searched), 1)
    fig, axes = plt.subplots(1, n, figsize=(4.5 * n, 3.8), squeeze=False)
    for ax, layer in zip(axes[0], searched):
        key = f"{prefix}{layer}"
        pts = [(r[key], r["val_ppl"]) for r in done if r.get(key) is not None]
        if pts:
            ax.scatter(*zip(*pts), alpha=0.5, label="trials")
            best = {}
            for x, y in pts:
                best[x] = min(y, best.get(x, y))
            xs = sorted(best)
            ax.plot(xs, [best[x] for x in xs], marker="o", label="best")
            ax.legend(fontsize="small")
        ax.set_xlabel(f"{xlabel} (layer {layer})" if n > 1 else xlabel)
        ax.set_ylabel("best validation perplexity")
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(os.path.join(out, name), dpi=100)
    plt.close(fig)
    return name


def searched_layers(hypermodel, search):
    """The layers with a column to plot (the shared proportion is
    plotted once, against layer ``layers[0]``'s column)."""
    if search == "hidden":
        return sorted(hypermodel.size_choices)
    if hypermodel.shared_proportion:
        return list(hypermodel.layers[:1])
    return list(hypermodel.layers)


def run(argv=None, callbacks=()):
    """Runs the search; ``callbacks`` go to ``tuner.search`` (Keras Tuner
    deep-copies them for every trial)."""
    args = parse_args(argv)
    from keras_rnnlm.runs import load_run_corpus
    from keras_rnnlm.tuning.base import base_config
    from keras_rnnlm.tuning.base import is_worker
    from keras_rnnlm.tuning.base import make_tuner
    from keras_rnnlm.tuning.base import trial_table
    from keras_rnnlm.tuning.base import write_table

    recipe = recipe_path(args.recipe or DEFAULT_RECIPE[args.search])
    config = base_config(recipe, args.preset, args.overrides, args.data_dir)
    corpus = load_run_corpus(config)
    hypermodel = make_hypermodel(args, config, corpus)
    tuner = make_tuner(hypermodel, args)
    tuner.search(
        epochs=args.epochs,
        verbose=config.train.verbose,
        callbacks=list(callbacks),
    )
    if is_worker():
        print(
            f"worker {os.environ['KERASTUNER_TUNER_ID']}: ran "
            f"{hypermodel.trials_run} trial(s)"
        )
        return []
    rows = trial_table(tuner)
    write_table(rows, args.out, table_keys(rows, args.search))
    png = plot(
        rows, args.out, args.search, searched_layers(hypermodel, args.search)
    )
    for r in rows:
        print(r)
    print(f"Results: {os.path.join(args.out, 'results.md')}, {png}")
    return rows


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(HERE, ".."))
    run()
    sys.exit(0)
