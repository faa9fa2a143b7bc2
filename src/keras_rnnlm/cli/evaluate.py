"""``keras-rnnlm evaluate | tune-cache | dynamic-eval | rank | ensemble |
feature-masking | context-words``: the commands that read a trained
run."""

import argparse
import json
import os

from keras_rnnlm.analysis.context_words import context_words_run
from keras_rnnlm.analysis.feature_masking import DEFAULT_PS
from keras_rnnlm.analysis.feature_masking import feature_masking
from keras_rnnlm.analysis.feature_masking import plot_curves
from keras_rnnlm.analysis.feature_masking import write_csv
from keras_rnnlm.cache_pointer import CacheConfig
from keras_rnnlm.cli.errors import UsageError
from keras_rnnlm.cli.train import add_command
from keras_rnnlm.cli.train import options_of
from keras_rnnlm.evaluation.cache import DEFAULT_LAMBDAS
from keras_rnnlm.evaluation.cache import DEFAULT_THETAS
from keras_rnnlm.evaluation.cache import DEFAULT_WINDOWS
from keras_rnnlm.evaluation.cache import cache_evaluate_run
from keras_rnnlm.evaluation.cache import tune_cache_run
from keras_rnnlm.evaluation.dynamic import PRESETS
from keras_rnnlm.evaluation.dynamic import STATISTICS
from keras_rnnlm.evaluation.dynamic import VARIANTS
from keras_rnnlm.evaluation.dynamic import dynamic_evaluate_run
from keras_rnnlm.evaluation.ensemble import ensemble_evaluate_runs
from keras_rnnlm.evaluation.rank import output_rank
from keras_rnnlm.evaluation.static import evaluate_run

SPLITS = ("train", "valid", "test")
# Options passed on under their own names.
DYNAMIC_EVAL_OPTIONS = (
    "split weights max_tokens static output verbose variant lr lamb epsilon "
    "bptt grad_batch_size grad_bptt grad_batches statistics cache"
).split()
FEATURE_MASKING_OPTIONS = (
    "runs split seed batch_size bptt max_tokens labels".split()
)


def cache_setting(text):
    """argparse type of ``--cache``: a preset (ptb, wt2) or
    window=W,theta=T,lambda=L (see keras_rnnlm.cache_pointer)."""
    try:
        return CacheConfig.parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


CACHE_HELP = (
    "continuous cache pointer (Grave et al. 2017): a preset (ptb: W 500, "
    "theta 1.0, lambda 0.1; wt2: W 3785, theta 0.662, lambda 0.1279) or "
    "window=W,theta=T,lambda=L, optionally ,reference=1 for awd-lstm-lm "
    "pointer.py's start (plain softmax for the first W+1 tokens and each "
    "segment's first); batch 1"
)


def _cache_line(r):
    c = r["cache"]
    return (
        f"{r['split']}: ppl {r['ppl']:.2f} with cache window {c['window']}, "
        f"theta {c['theta']:g}, lambda {c['lambda']:g} ({r['tokens']} "
        f"tokens, bptt {r['bptt']}, {r['tokens_per_s']:.0f} tokens/s)"
    )


def _evaluate_with_cache(args):
    if args.batch_size not in (None, 1):
        raise UsageError("--cache evaluates one stream: --batch-size 1")
    r = cache_evaluate_run(
        args.run_dir,
        args.cache,
        **options_of(args, "split bptt weights max_tokens"),
    )
    print(_cache_line(r))
    print(json.dumps(r, indent=2))
    return 0


def _tune_cache(args):
    r = tune_cache_run(
        args.run_dir,
        test=not args.no_test,
        **options_of(
            args,
            "out windows thetas lambdas reference bptt weights max_tokens",
        ),
    )
    b, v = r["best"], r["valid"]
    print(
        f"best: window {b['window']}, theta {b['theta']:g}, lambda "
        f"{b['lambda']:g}; valid ppl {v['plain']['ppl']:.2f} -> "
        f"{v['cache']['ppl']:.2f}"
    )
    if "test" in r:
        t = r["test"]
        print(f"test ppl {t['plain']['ppl']:.2f} -> {t['cache']['ppl']:.2f}")
    print("wrote " + ", ".join(r["outputs"].values()))
    return 0


def _tune_cache_options(t):
    t.add_argument("run_dir")
    t.add_argument(
        "--windows",
        nargs="+",
        type=int,
        default=list(DEFAULT_WINDOWS),
        help="cache sizes W to search",
    )
    t.add_argument(
        "--thetas", nargs="+", type=float, default=list(DEFAULT_THETAS)
    )
    t.add_argument(
        "--lambdas", nargs="+", type=float, default=list(DEFAULT_LAMBDAS)
    )
    t.add_argument(
        "--reference",
        action="store_true",
        help="awd-lstm-lm pointer.py's start (see --cache of evaluate)",
    )
    t.add_argument("--bptt", type=int, help="segment length")
    t.add_argument("--weights", help="weights file (default best.weights.h5)")
    t.add_argument(
        "--max-tokens", type=int, help="use the first N tokens of each split"
    )
    t.add_argument("--out", help="output folder (default RUN_DIR/cache)")
    t.add_argument(
        "--no-test", action="store_true", help="search only, no test run"
    )
    return t


def _evaluate(args):
    if args.cache is not None:
        return _evaluate_with_cache(args)
    if args.max_tokens is not None:
        raise UsageError("--max-tokens needs --cache")
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
    r = dynamic_evaluate_run(
        args.run_dir,
        preset=args.hparams,
        jit_compile=not args.no_jit,
        **options_of(args, DYNAMIC_EVAL_OPTIONS),
    )
    line = f"dynamic-eval {args.split}: ppl {r['ppl']:.2f}"
    if "bpc" in r:
        line += f", bpc {r['bpc']:.4f}"
    if "cache" in r:
        line += f" with cache (without {r['without_cache']['ppl']:.2f})"
    if "static" in r:
        line += f" (static {r['static']['ppl']:.2f}"
        if "static_cache" in r:
            line += f", static with cache {r['static_cache']['ppl']:.2f}"
        line += ")"
    print(
        f"{line} ({r['tokens']} tokens, {r['variant']}, lr {r['lr']:g}, "
        f"lambda {r['lambda']:g}, bptt {r['bptt']}, "
        f"{r['tokens_per_s']:.0f} tokens/s)"
    )
    print(f"wrote {r['output']}")
    return 0


def _dynamic_eval_options(d):

    d.add_argument("run_dir")
    d.add_argument("--split", default="test", choices=SPLITS)
    d.add_argument(
        "--hparams",
        choices=sorted(PRESETS),
        help="a named dynamic-evaluation hyperparameter set (default: "
        "Krause et al.'s AWD-LSTM values)",
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
    d.add_argument("--cache", type=cache_setting, help=CACHE_HELP)
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
    rows = feature_masking(
        args.run_dirs,
        layers=args.layer,
        ps=args.p,
        **options_of(args, FEATURE_MASKING_OPTIONS),
    )
    os.makedirs(args.out, exist_ok=True)
    csv_path = os.path.join(args.out, "feature_masking.csv")
    png_path = os.path.join(args.out, "feature_masking.png")
    write_csv(rows, csv_path)
    plot_curves(rows, png_path, title=f"Feature masking ({args.split})")
    print(f"wrote {csv_path} and {png_path}")
    return 0


def _context_words(args):
    rows = context_words_run(
        args.run_dir, args.text, args.top, args.weights, args.content_words
    )
    for word, cosine in rows:
        print(f"{word}\t{cosine:.4f}")
    return 0


def _masked_layer(text):
    if text.lower() == "all":
        return "all"
    if text.isdigit() and int(text) >= 1:
        return int(text)
    raise argparse.ArgumentTypeError(
        f"a masked layer is 'all' or a layer number from 1, got {text!r}"
    )


def _feature_masking_options(f):

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
    f.add_argument("--split", default="test", choices=SPLITS)
    f.add_argument("--out", default="feature_masking", help="output folder")
    f.add_argument("--seed", type=int, default=0, help="mask seed")
    f.add_argument("--batch-size", type=int, help="evaluation streams")
    f.add_argument("--bptt", type=int, help="evaluation window")
    f.add_argument(
        "--max-tokens", type=int, help="evaluate the first N tokens only"
    )
    f.add_argument("--labels", nargs="+", help="legend names, one per run")
    return f


def _rank(args):
    print(json.dumps(output_rank(args.run_dir, args.split, args.contexts)))
    return 0


def _ensemble(args):
    r = ensemble_evaluate_runs(
        args.run_dirs, args.split, args.batch_size, args.bptt
    )
    print(json.dumps(r, indent=2))
    return 0


def add_evaluation_commands(sub):
    """Adds evaluate, dynamic-eval, rank, ensemble and feature-masking."""
    e = add_command(
        sub, _evaluate, "evaluate", help="evaluate a run's checkpoint"
    )
    e.add_argument("run_dir")
    e.add_argument("--split", default="test", choices=SPLITS)
    e.add_argument("--batch-size", type=int)
    e.add_argument("--bptt", type=int)
    e.add_argument("--weights", help="weights file (default best.weights.h5)")
    e.add_argument("--cache", type=cache_setting, help=CACHE_HELP)
    e.add_argument(
        "--max-tokens", type=int, help="with --cache: the first N tokens"
    )

    t = add_command(
        sub,
        _tune_cache,
        "tune-cache",
        help="grid-search the cache pointer's theta, lambda (and W) on "
        "valid, then evaluate test",
    )
    _tune_cache_options(t)

    d = add_command(
        sub,
        _dynamic_eval,
        "dynamic-eval",
        help="dynamic evaluation (Krause et al. 2018)",
    )
    _dynamic_eval_options(d)

    r = add_command(
        sub,
        _rank,
        "rank",
        help="numerical rank of the log-probability matrix (MoS paper)",
    )
    r.add_argument("run_dir")
    r.add_argument("--split", default="valid", choices=SPLITS)
    r.add_argument(
        "--contexts", type=int, default=20000, help="rows of the matrix"
    )

    n = add_command(
        sub,
        _ensemble,
        "ensemble",
        help="perplexity of the mixture of several runs",
    )
    n.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    n.add_argument("--split", default="test", choices=SPLITS)
    n.add_argument("--batch-size", type=int)
    n.add_argument("--bptt", type=int)

    f = add_command(
        sub,
        _feature_masking,
        "feature-masking",
        help="perplexity with a fraction P of recurrent features masked",
    )
    _feature_masking_options(f)

    c = add_command(
        sub,
        _context_words,
        "context-words",
        help="the words nearest to a CBOW context vector (model.context)",
    )
    c.add_argument("run_dir")
    c.add_argument("text", help="whitespace-tokenised text")
    c.add_argument("--top", type=int, default=5)
    c.add_argument("--weights", help="weights file (default best.weights.h5)")
    c.add_argument(
        "--content-words",
        action="store_true",
        help="rank only words of letters outside gensim's stop-word list",
    )
