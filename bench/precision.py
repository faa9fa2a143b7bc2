"""Perplexity and evaluation speed of a trained run at float32 vs
``mixed_bfloat16``.

Loads a run's best weights (trained at any precision) into the package's
Evaluator built under each dtype policy and evaluates the validation and
test splits as the trainer reports them (the run's evaluation batch sizes
and window). Records, per split, a ``quality`` record (bf16 perplexity,
reference = float32 perplexity of the same weights) and an evaluation
``throughput`` record (bf16 tok/s, reference = float32), appended to
``bench/results/precision.jsonl``.

    python bench/precision.py --run runs/zaremba_ptb_small
"""

import argparse
import json
import os
import sys
import time

from _records import common_fields
from _records import set_threads

HERE = os.path.dirname(os.path.abspath(__file__))
POLICIES = ("float32", "mixed_bfloat16")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run", required=True)
    p.add_argument("--splits", nargs="+", default=["valid", "test"])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras
    import tensorflow as tf

    set_threads(args.threads)

    from keras_rnnlm.training.trainer import load_run
    from keras_rnnlm.training.trainer import load_run_corpus
    from keras_rnnlm.training.trainer import make_evaluator

    config, vocab = load_run(args.run)
    corpus = load_run_corpus(config, vocab)
    weights = os.path.join(args.run, "best.weights.h5")
    batch = {
        "valid": config.data.eval_batch_size or config.data.batch_size,
        "test": config.data.test_batch_size,
    }
    results = {}
    for policy in POLICIES:
        keras.config.set_dtype_policy(policy)
        try:
            for split in args.splits:
                ev = make_evaluator(config, corpus, batch[split])
                ev.load_weights(weights)
                ids = corpus.split(split)
                ev.evaluate(ids[: 20 * ev.bptt * ev.batch_size])  # warm-up
                t = time.perf_counter()
                res = ev.evaluate(ids)
                seconds = time.perf_counter() - t
                res["tokens_per_s"] = res["tokens"] / seconds
                results[policy, split] = res
                print(
                    f"{policy:15s} {split:5s} ppl {res['ppl']:9.3f} "
                    f"{res['tokens_per_s']:9.0f} tok/s (batch {batch[split]})"
                )
        finally:
            keras.config.set_dtype_policy("float32")
    if args.no_write:
        return 0

    common = common_fields(
        "precision.py",
        argv,
        args.threads,
        run=args.run,
        trained_dtype_policy=config.train.dtype_policy,
        tensorflow=tf.__version__,
    )
    metric = "bpc" if corpus.is_char_level else "ppl"
    out = os.path.join(HERE, "results", "precision.jsonl")
    with open(out, "a") as f:
        for split in args.splits:
            ref = results["float32", split]
            bf = results["mixed_bfloat16", split]
            recs = [
                {
                    "kind": "quality",
                    "name": f"{config.name}_{split}_mixed_bfloat16",
                    "value": round(bf[metric], 4),
                    "unit": metric,
                    "reference": round(ref[metric], 4),
                    "reference_name": "float32, same weights",
                    "ratio": round(bf[metric] / ref[metric], 4),
                },
                {
                    "kind": "throughput",
                    "name": f"{config.name}_{split}_eval_mixed_bfloat16",
                    "value": round(bf["tokens_per_s"], 1),
                    "unit": "tok/s",
                    "reference": round(ref["tokens_per_s"], 1),
                    "reference_name": "float32, same evaluator",
                    "ratio": round(bf["tokens_per_s"] / ref["tokens_per_s"], 3),
                    "batch_size": batch[split],
                },
            ]
            for rec in recs:
                rec["model"] = config.name
                f.write(json.dumps({**rec, **common}) + "\n")
    print(f"appended to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
