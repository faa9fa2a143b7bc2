"""The ``keras-rnnlm`` command line.

keras-rnnlm train RECIPE.py [--preset NAME] [--set section.key=value]
keras-rnnlm train --config run.json [--set ...]
keras-rnnlm evaluate RUN_DIR [--split test] [--batch-size 1] [--bptt 35]
keras-rnnlm dynamic-eval RUN_DIR [--split test] [--preset NAME] [--lr ETA]
    [--lambda L] [--epsilon E] [--bptt 5] [--variant rms|sgd] [--max-tokens N]
keras-rnnlm score MODEL [FILE] [--json]     (keras_rnnlm.scoring.commands)
keras-rnnlm rescore MODEL NBEST [--lm-weight W] [--reference REF]
keras-rnnlm export RUN_DIR OUT/NAME/VERSION
keras-rnnlm feature-masking RUN_DIR [RUN_DIR ...] [--layer all|N ...]
    [--p 0 0.05 ... 0.5] [--runs 5] [--split test] [--out DIR]
"""

import argparse
import json
import os
import sys

from keras_rnnlm.config import ConfigError
from keras_rnnlm.config import apply_overrides
from keras_rnnlm.config import load_config


def run_train(args, presets=None, preset=None):
    """Resolves the config from parsed ``train`` arguments and trains.

    ``presets``/``preset`` come from a recipe (its own command line);
    otherwise ``args.recipe`` or ``args.config`` names the source.
    """
    from keras_rnnlm.recipe import config_from_preset
    from keras_rnnlm.recipe import load_recipe
    from keras_rnnlm.training import train

    overrides = list(args.overrides)
    if args.data_dir:
        overrides.append(f"data.data_dir={args.data_dir}")
    if args.out:
        overrides.append(f"train.out_dir={args.out}")
    if presets is None and getattr(args, "config", None):
        config = apply_overrides(load_config(args.config), overrides)
    else:
        if presets is None:
            if not getattr(args, "recipe", None):
                raise ConfigError("train needs a RECIPE file or --config FILE")
            module = load_recipe(args.recipe)
            presets = module.PRESETS
            preset = args.preset or getattr(module, "DEFAULT_PRESET", None)
        config = config_from_preset(presets, preset, overrides)
    if args.print_config:
        print(config.to_json())
        return 0
    train(config, resume=not args.no_resume)
    return 0


def train_parser(parser, preset_flags=None):
    """Adds the options shared by ``keras-rnnlm train`` and recipe files.

    ``preset_flags``: the spellings of the preset option (default
    ``--preset`` and ``--size``).
    """
    parser.add_argument(
        *(preset_flags or ("--preset", "--size")),
        dest="preset",
        help="preset name",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override a config value (JSON), e.g. --set train.epochs=2",
    )
    parser.add_argument("--out", help="run directory (train.out_dir)")
    parser.add_argument(
        "--data-dir", help="corpus root (else $KERAS_RNNLM_DATA, cache)"
    )
    parser.add_argument(
        "--no-resume",
        action="store_true",
        help="start from scratch even if the run directory has a checkpoint",
    )
    parser.add_argument(
        "--print-config",
        action="store_true",
        help="print the resolved config and exit",
    )
    return parser


def _evaluate(args):
    from keras_rnnlm.training import evaluate_run

    batch_sizes = {args.split: args.batch_size} if args.batch_size else None
    results = evaluate_run(
        args.run_dir,
        splits=(args.split,),
        batch_sizes=batch_sizes,
        bptt=args.bptt,
        weights=args.weights,
        write=False,
    )
    print(json.dumps(results, indent=2))
    return 0


def _dynamic_eval(args):
    from keras_rnnlm.evaluation.dynamic import dynamic_evaluate_run

    r = dynamic_evaluate_run(
        args.run_dir,
        split=args.split,
        preset=args.preset,
        weights=args.weights,
        max_tokens=args.max_tokens,
        static=args.static,
        output=args.output,
        verbose=args.verbose,
        jit_compile=not args.no_jit,
        variant=args.variant,
        lr=args.lr,
        lamb=args.lamb,
        epsilon=args.epsilon,
        bptt=args.bptt,
        grad_batch_size=args.grad_batch_size,
        grad_bptt=args.grad_bptt,
        grad_batches=args.grad_batches,
        statistics=args.statistics,
    )
    line = f"dynamic-eval {args.split}: ppl {r['ppl']:.2f}"
    if "bpc" in r:
        line += f", bpc {r['bpc']:.4f}"
    if "static" in r:
        line += f" (static {r['static']['ppl']:.2f})"
    print(
        f"{line} ({r['tokens']} tokens, {r['variant']}, lr {r['lr']:g}, "
        f"lambda {r['lambda']:g}, bptt {r['bptt']}, "
        f"{r['tokens_per_s']:.0f} tokens/s)"
    )
    print(f"wrote {r['output']}")
    return 0


def dynamic_eval_parser(d):
    """Adds the ``dynamic-eval`` options to the subparser ``d``."""
    from keras_rnnlm.evaluation.dynamic import PRESETS
    from keras_rnnlm.evaluation.dynamic import STATISTICS
    from keras_rnnlm.evaluation.dynamic import VARIANTS

    d.add_argument("run_dir")
    d.add_argument(
        "--split", default="test", choices=["train", "valid", "test"]
    )
    d.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        help="hyperparameter set (default: Krause et al.'s AWD-LSTM values)",
    )
    d.add_argument("--variant", choices=VARIANTS)
    d.add_argument("--lr", type=float, help="learning rate eta")
    d.add_argument(
        "--lambda", dest="lamb", type=float, help="decay to trained weights"
    )
    d.add_argument("--epsilon", type=float, help="RMS stabiliser")
    d.add_argument("--bptt", type=int, help="segment length (one update each)")
    d.add_argument(
        "--grad-batch-size", type=int, help="streams of the statistics pass"
    )
    d.add_argument("--grad-bptt", type=int, help="its window (default bptt)")
    d.add_argument(
        "--grad-batches",
        type=int,
        help="training batches for the statistics (default: all)",
    )
    d.add_argument(
        "--statistics",
        choices=STATISTICS,
        help="mean: paper equations; sum: MoS/original code scaling",
    )
    d.add_argument(
        "--max-tokens", type=int, help="score only the first N tokens"
    )
    d.add_argument("--weights", help="weights file (default best.weights.h5)")
    d.add_argument(
        "--static",
        action="store_true",
        help="also report the static perplexity of the same tokens",
    )
    d.add_argument(
        "--output",
        help="JSON result (default RUN_DIR/dynamic_eval_SPLIT.json)",
    )
    d.add_argument(
        "--no-jit",
        action="store_true",
        help="plain tf.function steps instead of XLA-compiled ones",
    )
    d.add_argument("--verbose", type=int, default=0)
    return d


def _feature_masking(args):
    from keras_rnnlm.analysis.feature_masking import feature_masking
    from keras_rnnlm.analysis.feature_masking import plot_curves
    from keras_rnnlm.analysis.feature_masking import write_csv

    rows = feature_masking(
        args.run_dirs,
        layers=args.layer,
        ps=args.p,
        runs=args.runs,
        split=args.split,
        seed=args.seed,
        batch_size=args.batch_size,
        bptt=args.bptt,
        max_tokens=args.max_tokens,
        labels=args.labels,
    )
    os.makedirs(args.out, exist_ok=True)
    csv_path = os.path.join(args.out, "feature_masking.csv")
    png_path = os.path.join(args.out, "feature_masking.png")
    write_csv(rows, csv_path)
    plot_curves(rows, png_path, title=f"Feature masking ({args.split})")
    print(f"wrote {csv_path} and {png_path}")
    return 0


def _masked_layer(text):
    if text.lower() == "all":
        return "all"
    if text.isdigit() and int(text) >= 1:
        return int(text)
    raise argparse.ArgumentTypeError(
        f"a masked layer is 'all' or a layer number from 1, got {text!r}"
    )


def feature_masking_parser(f):
    """Adds the ``feature-masking`` options to the subparser ``f``."""
    from keras_rnnlm.analysis.feature_masking import DEFAULT_PS

    f.add_argument(
        "run_dirs",
        nargs="+",
        metavar="RUN_DIR",
        help="run directories (or .weights.h5 files inside run directories)",
    )
    f.add_argument(
        "--layer",
        nargs="+",
        type=_masked_layer,
        default=["all"],
        help="masked layer(s): 'all' and/or 1-based numbers; one panel each",
    )
    f.add_argument(
        "--p",
        nargs="+",
        type=float,
        default=list(DEFAULT_PS),
        help="masking probabilities (default 0, 0.05, ..., 0.5)",
    )
    f.add_argument("--runs", type=int, default=5, help="masks per P")
    f.add_argument(
        "--split", default="test", choices=["train", "valid", "test"]
    )
    f.add_argument("--out", default="feature_masking", help="output folder")
    f.add_argument("--seed", type=int, default=0, help="mask seed")
    f.add_argument("--batch-size", type=int, help="evaluation streams")
    f.add_argument("--bptt", type=int, help="evaluation window")
    f.add_argument(
        "--max-tokens", type=int, help="evaluate the first N tokens only"
    )
    f.add_argument("--labels", nargs="+", help="legend names, one per run")
    return f


def build_parser():
    parser = argparse.ArgumentParser(
        prog="keras-rnnlm", description="Recurrent language models, Keras 3"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    t = sub.add_parser("train", help="train a recipe preset or a config")
    t.add_argument("recipe", nargs="?", help="recipe file (recipes/*.py)")
    t.add_argument("--config", help="a config.json (e.g. of an earlier run)")
    train_parser(t)
    t.set_defaults(func=run_train)

    e = sub.add_parser("evaluate", help="evaluate a run's checkpoint")
    e.add_argument("run_dir")
    e.add_argument(
        "--split", default="test", choices=["train", "valid", "test"]
    )
    e.add_argument("--batch-size", type=int)
    e.add_argument("--bptt", type=int)
    e.add_argument("--weights", help="weights file (default best.weights.h5)")
    e.set_defaults(func=_evaluate)

    d = sub.add_parser(
        "dynamic-eval", help="dynamic evaluation (Krause et al. 2018)"
    )
    dynamic_eval_parser(d)
    d.set_defaults(func=_dynamic_eval)

    f = sub.add_parser(
        "feature-masking",
        help="perplexity with a fraction P of recurrent features masked",
    )
    feature_masking_parser(f)
    f.set_defaults(func=_feature_masking)

    from keras_rnnlm.scoring.commands import add_scoring_commands

    add_scoring_commands(sub)  # score, rescore, export
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as e:
        print(f"keras-rnnlm: config error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
