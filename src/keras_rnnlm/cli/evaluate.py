"""``keras-rnnlm evaluate | tune-cache | dynamic-eval | rank | ensemble |
feature-masking | context-words``: the commands that read a trained
run."""

import json
import os

from keras_rnnlm.analysis.context_words import context_words_run
from keras_rnnlm.analysis.feature_masking import DEFAULT_PS
from keras_rnnlm.analysis.feature_masking import feature_masking
from keras_rnnlm.analysis.feature_masking import plot_curves
from keras_rnnlm.analysis.feature_masking import write_csv
from keras_rnnlm.cli.errors import UsageError
from keras_rnnlm.cli.errors import output_folder
from keras_rnnlm.cli.train import options_of
from keras_rnnlm.evaluation.cache import DEFAULT_LAMBDAS
from keras_rnnlm.evaluation.cache import DEFAULT_THETAS
from keras_rnnlm.evaluation.cache import DEFAULT_WINDOWS
from keras_rnnlm.evaluation.cache import cache_evaluate_run
from keras_rnnlm.evaluation.cache import tune_cache_run
from keras_rnnlm.evaluation.dynamic import dynamic_evaluate_run
from keras_rnnlm.evaluation.ensemble import ensemble_evaluate_runs
from keras_rnnlm.evaluation.rank import output_rank
from keras_rnnlm.evaluation.static import evaluate_run

# Options passed on under their own names.
DYNAMIC_EVAL_OPTIONS = (
    "split weights max_tokens static output verbose variant lr lamb epsilon "
    "bptt grad_batch_size grad_bptt grad_batches statistics cache"
).split()
FEATURE_MASKING_OPTIONS = (
    "runs split seed batch_size bptt max_tokens labels".split()
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


def run_tune_cache(args):
    """``keras-rnnlm tune-cache``; a grid not given is the library's
    (``DEFAULT_WINDOWS``, ``DEFAULT_THETAS``, ``DEFAULT_LAMBDAS``)."""
    output_folder(args.out)
    r = tune_cache_run(
        args.run_dir,
        test=not args.no_test,
        windows=args.windows or list(DEFAULT_WINDOWS),
        thetas=args.thetas or list(DEFAULT_THETAS),
        lambdas=args.lambdas or list(DEFAULT_LAMBDAS),
        **options_of(args, "out reference bptt weights max_tokens"),
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


def run_evaluate(args):
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


def run_dynamic_eval(args):
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


def run_feature_masking(args):
    """``keras-rnnlm feature-masking``; without ``--p``, the paper's
    probabilities (``DEFAULT_PS``)."""
    output_folder(args.out)
    rows = feature_masking(
        args.run_dirs,
        layers=args.layer,
        ps=args.p or list(DEFAULT_PS),
        **options_of(args, FEATURE_MASKING_OPTIONS),
    )
    csv_path = os.path.join(args.out, "feature_masking.csv")
    png_path = os.path.join(args.out, "feature_masking.png")
    write_csv(rows, csv_path)
    plot_curves(rows, png_path, title=f"Feature masking ({args.split})")
    print(f"wrote {csv_path} and {png_path}")
    return 0


def run_context_words(args):
    rows = context_words_run(
        args.run_dir, args.text, args.top, args.weights, args.content_words
    )
    for word, cosine in rows:
        print(f"{word}\t{cosine:.4f}")
    return 0


def run_rank(args):
    print(json.dumps(output_rank(args.run_dir, args.split, args.contexts)))
    return 0


def run_ensemble(args):
    r = ensemble_evaluate_runs(
        args.run_dirs, args.split, args.batch_size, args.bptt
    )
    print(json.dumps(r, indent=2))
    return 0
