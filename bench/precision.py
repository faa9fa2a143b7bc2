"""Perplexity and evaluation speed of a trained run at float32 vs
``mixed_bfloat16``.

Loads a run's best weights (trained at any precision) into the package's
Evaluator built under each dtype policy and evaluates the validation and
test splits as the trainer reports them (the run's evaluation batch sizes
and window). Records, per split, a ``quality`` record (bf16 perplexity,
reference = float32 perplexity of the same weights) and an evaluation
``throughput`` record (bf16 tok/s, reference = float32), appended to
``bench/results/precision.jsonl``.

    python -m bench.precision --run runs/zaremba_ptb_small
"""

import os
import sys
import time

from bench.harness.options import add_output_arguments
from bench.harness.options import add_threads_argument
from bench.harness.options import bench_parser
from bench.harness.processes import set_threads
from bench.harness.records import record
from bench.harness.records import record_fields
from bench.harness.records import write_records

MODULE = "bench.precision"
POLICIES = ("float32", "mixed_bfloat16")


def evaluate_policies(args, config, corpus):
    """``{(policy, split): Evaluator result with tokens_per_s}`` of the
    run's best weights under each dtype policy."""
    import keras

    from keras_rnnlm.evaluation import make_evaluator

    weights = os.path.join(args.run, "best.weights.h5")
    results = {}
    for policy in POLICIES:
        keras.config.set_dtype_policy(policy)
        try:
            for split in args.splits:
                batch = eval_batch(config, split)
                ev = make_evaluator(config, corpus, batch)
                ev.load_weights(weights)
                ids = corpus.split(split)
                ev.evaluate(ids[: 20 * ev.bptt * ev.batch_size])  # warm-up
                t = time.perf_counter()
                res = ev.evaluate(ids)
                res["tokens_per_s"] = res["tokens"] / (time.perf_counter() - t)
                results[policy, split] = res
                print(
                    f"{policy:15s} {split:5s} ppl {res['ppl']:9.3f} "
                    f"{res['tokens_per_s']:9.0f} tok/s (batch {batch})"
                )
        finally:
            keras.config.set_dtype_policy("float32")
    return results


def eval_batch(config, split):
    """The batch the trainer reports ``split`` at."""
    if split == "test":
        return config.data.test_batch_size
    return config.data.eval_batch_size or config.data.batch_size


def main(argv=None):
    p = bench_parser(MODULE, __doc__)
    p.add_argument("--run", required=True)
    p.add_argument("--splits", nargs="+", default=["valid", "test"])
    add_threads_argument(p)
    add_output_arguments(p, "precision.jsonl")
    args = p.parse_args(argv)
    set_threads(args.threads)
    import tensorflow as tf

    from keras_rnnlm.runs import open_run

    config, corpus = open_run(args.run)
    results = evaluate_policies(args, config, corpus)
    metric = "bpc" if corpus.is_char_level else "ppl"
    records = []
    for split in args.splits:
        ref = results["float32", split]
        bf = results["mixed_bfloat16", split]
        records += [
            record(
                "quality",
                f"{config.name}_{split}_mixed_bfloat16",
                config.name,
                bf[metric],
                metric,
                ref[metric],
                "float32, same weights",
                digits=4,
                ratio_digits=4,
            ),
            record(
                "throughput",
                f"{config.name}_{split}_eval_mixed_bfloat16",
                config.name,
                bf["tokens_per_s"],
                "tok/s",
                ref["tokens_per_s"],
                "float32, same evaluator",
                batch_size=eval_batch(config, split),
            ),
        ]
    fields = record_fields(
        MODULE,
        argv,
        threads=args.threads,
        run=args.run,
        trained_dtype_policy=config.train.dtype_policy,
        tensorflow=tf.__version__,
    )
    write_records(args, records, fields)
    return 0


if __name__ == "__main__":
    sys.exit(main())
