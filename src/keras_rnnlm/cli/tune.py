"""The command line of the Keras Tuner recipes (``recipes/tune_*.py``),
with the command line's error policy.

A tuning recipe is a docstring, its defaults (data) and one call::

    raise SystemExit(multicell_search_main(description=__doc__, **SEARCH))

Each search parses its options (those of :func:`add_search_arguments`
and its own), builds the base config from a recipe preset, runs the
tuner and, on the chief (or a single process), writes ``results.csv``,
``results.md`` and a plot into ``--out``.
``run_*_search`` return the trial rows (best first; ``[]`` on a
distributed worker), ``*_search_main`` the exit status; they first set
the process up (:func:`keras_rnnlm.cli.process.prepare_process`).
"""

import argparse
import csv
import os
import sys
import textwrap

import keras_tuner
from keras_tuner.src.distribute import utils as keras_tuner_distribute

from keras_rnnlm.cli.errors import debug_requested
from keras_rnnlm.cli.errors import output_folder
from keras_rnnlm.cli.errors import run_reporting_errors
from keras_rnnlm.cli.process import prepare_process
from keras_rnnlm.layers.multicell_lstm import STRATEGIES
from keras_rnnlm.recipe import config_from_preset
from keras_rnnlm.recipe import load_recipe
from keras_rnnlm.runs import load_run_corpus
from keras_rnnlm.training.pretrained import with_pretrained
from keras_rnnlm.tuning.base import OBJECTIVE
from keras_rnnlm.tuning.base import trial_table
from keras_rnnlm.tuning.major_minor import DECILES
from keras_rnnlm.tuning.major_minor import HiddenSizeHyperModel
from keras_rnnlm.tuning.major_minor import MajorMinorHyperModel
from keras_rnnlm.tuning.multicell import PAPER_CELLS
from keras_rnnlm.tuning.multicell import MultiCellHyperModel
from keras_rnnlm_launcher.commands import ENVIRONMENT
from keras_rnnlm_launcher.commands import add_debug_flag
from keras_rnnlm_launcher.commands import add_set_option

TUNERS = {
    "random": keras_tuner.RandomSearch,
    "grid": keras_tuner.GridSearch,
}

MULTICELL_KEYS = ["trial", "num_cells", "strategy", "o_thr", "val_ppl"]
MULTICELL_KEYS += ["best_epoch", "status"]


# -- shared by every search ----------------------------------------------


def add_search_arguments(parser, out, max_trials=10, epochs=3):
    """The options every ``recipes/tune_*.py`` shares."""
    parser.add_argument(
        "--tuner",
        choices=sorted(TUNERS),
        default="random",
        help="Keras Tuner's search (default %(default)s)",
    )
    parser.add_argument(
        "--max-trials", type=int, default=max_trials, help="trial budget"
    )
    parser.add_argument(
        "--epochs", type=int, default=epochs, help="epoch budget per trial"
    )
    parser.add_argument("--seed", type=int, default=1234, help="tuner seed")
    parser.add_argument(
        "--out",
        default=out,
        help="the search's folder (default %(default)s)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="start the search over (default: continue the one in --out)",
    )
    add_set_option(parser, "override a config value of the base preset")
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        help="folder holding the corpora (else $KERAS_RNNLM_DATA, then the "
        "Keras cache)",
    )
    parser.add_argument(
        "--pretrained",
        metavar="FILE",
        help="start every trial from word2vec embeddings "
        "(model.pretrained_embeddings; `keras-rnnlm word2vec` writes one)",
    )
    add_debug_flag(parser)
    return parser


def base_config(
    recipe_path, preset, overrides=(), data_dir=None, pretrained=None
):
    """A recipe preset with ``--set`` overrides (and ``--data-dir``), from
    the word2vec file ``pretrained`` (``--pretrained``) if given."""
    recipe = load_recipe(recipe_path)
    overrides = list(overrides)
    if data_dir:
        overrides.append(f"data.data_dir={data_dir}")
    config = config_from_preset(recipe.PRESETS, preset, overrides)
    if pretrained:
        config = with_pretrained(config, pretrained)
    return config


def is_worker():
    """Whether this process is a worker of a distributed search
    (``KERASTUNER_ORACLE_IP`` set and ``KERASTUNER_TUNER_ID`` not a
    chief): it runs trials, the chief's oracle keeps the results."""
    return (
        keras_tuner_distribute.has_chief_oracle()
        and not keras_tuner_distribute.is_chief_oracle()
    )


def make_tuner(hypermodel, args, project_name="search"):
    """The tuner of ``args.tuner`` writing into ``args.out``.

    A distributed worker never overwrites the project (the chief does,
    once, for everyone).
    """
    output_folder(args.out)
    return TUNERS[args.tuner](
        hypermodel,
        objective=OBJECTIVE,
        max_trials=args.max_trials,
        seed=args.seed,
        directory=args.out,
        project_name=project_name,
        overwrite=args.overwrite and not is_worker(),
    )


def write_table(rows, out, keys, name="results"):
    """``name.csv`` and ``name.md`` with the columns ``keys``."""
    with open(os.path.join(out, f"{name}.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    lines = ["| " + " | ".join(keys) + " |", "|" + " --- |" * len(keys)]
    for r in rows:
        cells = []
        for k in keys:
            v = r.get(k)
            if isinstance(v, float):
                cells.append(f"{v:.2f}")
            elif v is None:
                cells.append("")
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join(cells) + " |")
    with open(os.path.join(out, f"{name}.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def _parser(description):
    return argparse.ArgumentParser(
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=textwrap.fill(ENVIRONMENT),
    )


def _search(hypermodel, args, config, callbacks=()):
    """Runs the tuner; the trial rows, or ``None`` on a worker."""
    tuner = make_tuner(hypermodel, args)
    tuner.search(
        epochs=args.epochs,
        verbose=config.train.verbose,
        callbacks=list(callbacks),
    )
    if is_worker():  # distributed: the chief writes the results
        print(
            f"worker {os.environ['KERASTUNER_TUNER_ID']}: ran "
            f"{hypermodel.trials_run} trial(s)"
        )
        return None
    return trial_table(tuner)


def _report(rows, out, plot_name):
    for r in rows:
        print(r)
    print(
        f"Results: {os.path.join(out, 'results.md')}, "
        f"{os.path.join(out, plot_name)}"
    )


def _save(fig, plt, out, name):
    """Writes ``fig`` to ``out/name`` and closes it; returns ``name``."""
    fig.tight_layout()
    fig.savefig(os.path.join(out, name), dpi=100)
    plt.close(fig)
    return name


def _pyplot():
    import matplotlib  # loaded only when a plot is drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after matplotlib.use("Agg")

    return plt


# -- the multi-cell LSTM (recipes/tune_multicell.py) -----------------------


def multicell_parser(description=None, size="small", out="runs/tune_multicell"):
    p = _parser(description)
    p.add_argument("--size", default=size, help="base recipe preset")
    p.add_argument(
        "--cells",
        type=int,
        nargs="+",
        default=list(PAPER_CELLS),
        help="candidate numbers of cells (default: the paper's)",
    )
    p.add_argument(
        "--strategies",
        nargs="+",
        default=list(STRATEGIES),
        help="candidate strategies of combining the cells (default: all)",
    )
    return add_search_arguments(p, out=out)


def plot_cells(rows, out, name="ppl_vs_cells.png"):
    """Best validation perplexity against the number of cells, one line
    per strategy."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    by_strategy = {}
    for r in rows:
        if r["val_ppl"] is not None:
            best = by_strategy.setdefault(r["strategy"], {})
            if r["val_ppl"] < best.get(r["num_cells"], float("inf")):
                best[r["num_cells"]] = r["val_ppl"]
    for strategy, points in sorted(by_strategy.items()):
        xs = sorted(points)
        ax.plot(xs, [points[x] for x in xs], marker="o", label=strategy)
    ax.set_xlabel("memory cells per node")
    ax.set_ylabel("best validation perplexity")
    ax.set_title("Multi-cell LSTM: perplexity vs number of cells")
    if by_strategy:
        ax.legend()
    return _save(fig, plt, out, name)


def run_multicell_search(
    base_recipe,
    argv=None,
    description=None,
    size="small",
    out="runs/tune_multicell",
    callbacks=(),
):
    """Searches cells / strategy / ``o_thr`` on a preset (``--size``) of
    ``base_recipe`` (a recipe path); returns the trial rows."""
    args = multicell_parser(description, size, out).parse_args(argv)
    config = base_config(
        base_recipe, args.size, args.overrides, args.data_dir, args.pretrained
    )
    hypermodel = MultiCellHyperModel(
        config,
        load_run_corpus(config),
        cells=args.cells,
        strategies=args.strategies,
    )
    rows = _search(hypermodel, args, config, callbacks)
    if rows is None:
        return []
    write_table(rows, args.out, MULTICELL_KEYS)
    _report(rows, args.out, plot_cells(rows, args.out))
    return rows


def multicell_search_main(base_recipe, argv=None, **kwargs):
    """:func:`run_multicell_search`; returns the exit status (2 after a
    user error)."""
    return _main(run_multicell_search, argv, base_recipe, **kwargs)


# -- Major-Minor ratios and LSTM sizes (recipes/tune_mmlstm_ratio.py) ------


def major_minor_parser(
    description=None, preset="cpu", out="runs/tune_mmlstm_ratio"
):
    p = _parser(description)
    p.add_argument(
        "--search",
        choices=("ratio", "hidden"),
        default="ratio",
        help="ratio: the major/minor proportions; hidden: the LSTM sizes "
        "(default %(default)s)",
    )
    p.add_argument(
        "--recipe",
        help="base recipe: a name in recipes/ or a path (default: the "
        "search's base recipe)",
    )
    p.add_argument("--preset", default=preset, help="preset of the recipe")
    p.add_argument(
        "--layers",
        type=int,
        nargs="+",
        help="searched layers, from 1 (ratio: all; hidden: 1)",
    )
    p.add_argument(
        "--proportions",
        type=float,
        nargs="+",
        default=list(DECILES),
        help="candidate major proportions (default: the deciles)",
    )
    p.add_argument(
        "--shared", action="store_true", help="one proportion for all"
    )
    p.add_argument(
        "--budget",
        default="base",
        help="parameter budget: base, none or a number of parameters",
    )
    p.add_argument(
        "--solve-layers",
        type=int,
        nargs="+",
        help="layers, from 1, resized to meet the budget (default: those "
        "not searched and not feeding a tied decoder)",
    )
    p.add_argument(
        "--size-step",
        type=int,
        default=10,
        help="solved sizes are multiples of this (default %(default)s)",
    )
    p.add_argument("--sizes", type=int, nargs="+", help="candidate sizes")
    p.add_argument(
        "--factors", type=float, nargs="+", help="hidden: multiples of c"
    )
    p.add_argument(
        "--learning-rates",
        type=float,
        nargs="+",
        help="candidate train.learning_rate values (default: the preset's)",
    )
    p.add_argument(
        "--bptts",
        type=int,
        nargs="+",
        help="candidate training windows (default: the preset's data.bptt)",
    )
    return add_search_arguments(p, out=out)


def recipe_path(name, recipe_dir):
    """``name`` if it is a file, else ``recipe_dir/name.py``."""
    if os.path.exists(name):
        return name
    return os.path.join(recipe_dir, f"{name}.py")


def _budget(text):
    if text in (None, "none"):
        return None
    if text == "base":
        return text
    return int(float(text))


def major_minor_hypermodel(args, config, corpus):
    """The hypermodel of parsed :func:`major_minor_parser` arguments."""
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


def _prefix(search):
    return "major_proportion_" if search == "ratio" else "size_"


def major_minor_keys(rows, search):
    """The table's columns: trial, the searched values, the rest."""
    prefix = _prefix(search)
    middle = sorted(
        {k for r in rows for k in r if k.startswith(prefix)},
        key=lambda k: int(k[len(prefix) :]),
    )
    last = ["hidden_sizes", "params", "learning_rate", "bptt", "val_ppl"]
    last += ["best_epoch", "status"]
    present = {k for r in rows for k in r}
    return ["trial"] + middle + [k for k in last if k in present]


def searched_layers(hypermodel, search):
    """The layers with a column to plot (the shared proportion is
    plotted once, against layer ``layers[0]``'s column)."""
    if search == "hidden":
        return sorted(hypermodel.size_choices)
    if hypermodel.shared_proportion:
        return list(hypermodel.layers[:1])
    return list(hypermodel.layers)


def plot_layers(rows, out, search, searched):
    """Validation perplexity against each searched layer's value (every
    trial a point, the best per value a line); returns the file name."""
    plt = _pyplot()
    prefix = _prefix(search)
    if search == "ratio":
        xlabel = "Major proportion"
        name, title = "ppl_vs_ratio.png", "MMLSTM: perplexity vs Major ratio"
    else:
        xlabel = "hidden size"
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
    return _save(fig, plt, out, name)


def run_major_minor_search(
    recipe_dir,
    base_recipes,
    argv=None,
    description=None,
    preset="cpu",
    out="runs/tune_mmlstm_ratio",
    callbacks=(),
):
    """Searches Major proportions (``--search ratio``) or hidden sizes
    (``--search hidden``) on a recipe preset; returns the trial rows.

    Args:
        recipe_dir: where ``--recipe NAME`` is looked up.
        base_recipes: ``{search: recipe name}``, the default ``--recipe``.
        callbacks: passed to ``tuner.search`` (Keras Tuner deep-copies
            them for every trial).
    """
    args = major_minor_parser(description, preset, out).parse_args(argv)
    recipe = recipe_path(args.recipe or base_recipes[args.search], recipe_dir)
    config = base_config(
        recipe, args.preset, args.overrides, args.data_dir, args.pretrained
    )
    hypermodel = major_minor_hypermodel(args, config, load_run_corpus(config))
    rows = _search(hypermodel, args, config, callbacks)
    if rows is None:
        return []
    write_table(rows, args.out, major_minor_keys(rows, args.search))
    searched = searched_layers(hypermodel, args.search)
    _report(rows, args.out, plot_layers(rows, args.out, args.search, searched))
    return rows


def major_minor_search_main(recipe_dir, base_recipes, argv=None, **kwargs):
    """:func:`run_major_minor_search`; returns the exit status (2 after a
    user error)."""
    return _main(
        run_major_minor_search, argv, recipe_dir, base_recipes, **kwargs
    )


def _main(search, argv, *args, **kwargs):
    argv = sys.argv[1:] if argv is None else list(argv)

    def run():
        prepare_process()
        search(*args, argv=argv, **kwargs)
        return 0

    # messages start with the script's name, as argparse's do
    prog = os.path.basename(sys.argv[0]) or "tune"
    return run_reporting_errors("tune", run, debug_requested(argv), prog=prog)
