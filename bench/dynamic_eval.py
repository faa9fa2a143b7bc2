"""Dynamic evaluation speed and quality, Keras vs PyTorch side by side.

Runs Krause et al.'s RMS dynamic evaluation (the package's
:class:`~keras_rnnlm.evaluation.dynamic.DynamicEvaluator`, a named preset)
on a trained LSTM run (embedding -> LSTMs -> softmax, e.g. the Zaremba
small PTB run), and the same algorithm in PyTorch CPU
(:mod:`bench.reference.dynamic_eval`) on the same weights and the same
batches in the same process:

1. gradient statistics over the training split (``grad_batch_size``
   streams, segments of ``grad_bptt``, state carried);
2. the batch-1 stream over the evaluated split, each segment scored
   before its update ``theta += lambda * decrate * (theta0 - theta) - eta
   * grad / (MS + epsilon)``.

Reports the static and dynamic perplexity of both implementations (they
must agree: same algorithm, same weights) and tokens/s of each phase.
Appends ``throughput`` records (tokens/s, reference = PyTorch) to
``bench/results/dynamic_eval.jsonl`` (``--out``) and a ``quality`` record
(dynamic perplexity, reference = the static perplexity of the same tokens)
to ``bench/results/quality.jsonl`` (``--quality-out``).

    python -m bench.dynamic_eval --run runs/zaremba_ptb_small \
        --preset mmlstm_ptb
"""

import os
import sys

from bench.harness import RESULTS
from bench.harness.options import add_output_arguments
from bench.harness.options import add_threads_argument
from bench.harness.options import bench_parser
from bench.harness.processes import set_threads
from bench.harness.records import record
from bench.harness.records import record_fields
from bench.harness.records import write_records
from bench.harness.torch_side import torch_label

MODULE = "bench.dynamic_eval"


def keras_side(args, corpus, config):
    from keras_rnnlm.evaluation import Evaluator
    from keras_rnnlm.evaluation.dynamic import DynamicEvaluator

    weights = os.path.join(args.run, "best.weights.h5")
    over = {}
    if args.grad_batches is not None:
        over["grad_batches"] = args.grad_batches
    ev = DynamicEvaluator.from_preset(
        args.preset, config.model, len(corpus.vocab), **over
    )
    ev.load_weights(weights)
    ids = corpus.split(args.split)
    if args.max_tokens is not None:
        ids = ids[: args.max_tokens + 1]
    stats = ev.compute_statistics(corpus.train)
    print(
        f"keras statistics: {stats['batches']} batches, "
        f"{stats['tokens'] / stats['seconds']:.0f} tok/s"
    )
    dyn = ev.evaluate(ids, verbose=0)
    print(
        f"keras dynamic: ppl {dyn['ppl']:.3f}, {dyn['tokens_per_s']:.0f} tok/s"
    )
    sev = Evaluator(config.model, len(corpus.vocab), 1, ev.bptt)
    sev.load_weights(weights)
    static = sev.evaluate(ids)
    print(f"keras static: ppl {static['ppl']:.3f}")
    return ev, ids, stats, dyn, static


def torch_side(ev, corpus, ids):
    """The same algorithm in PyTorch on ``ev.model``'s weights."""
    from bench.reference.dynamic_eval import DynamicEval

    ref = DynamicEval(ev.model, ev)
    stat_rate = ref.statistics(corpus.train)
    ppl, rate = ref.evaluate(ids)
    return {"stat_tokens_per_s": stat_rate, "tokens_per_s": rate, "ppl": ppl}


def parser():
    p = bench_parser(MODULE, __doc__)
    p.add_argument("--run", required=True, help="a trained LSTM run dir")
    p.add_argument("--preset", default="mmlstm_ptb")
    p.add_argument("--split", default="test")
    p.add_argument("--max-tokens", type=int, default=None)
    p.add_argument(
        "--grad-batches",
        type=int,
        default=None,
        help="training batches for the statistics (default: the preset's)",
    )
    add_threads_argument(p)
    p.add_argument("--name", default=None, help="quality record name")
    add_output_arguments(p, "dynamic_eval.jsonl")
    p.add_argument(
        "--quality-out",
        default=os.path.join(RESULTS, "quality.jsonl"),
        help="where the quality record goes (default: %(default)s)",
    )
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    import tensorflow as tf
    import torch

    set_threads(args.threads, torch)

    from keras_rnnlm.runs import open_run

    config, corpus = open_run(args.run)
    ev, ids, stats, dyn, static = keras_side(args, corpus, config)
    ref = torch_side(ev, corpus, ids)
    fields = record_fields(
        MODULE,
        argv,
        threads=args.threads,
        run=args.run,
        preset=args.preset,
        split=args.split,
        tokens=dyn["tokens"],
        static_ppl=round(static["ppl"], 3),
        keras_dynamic_ppl=round(dyn["ppl"], 3),
        torch_dynamic_ppl=round(ref["ppl"], 3),
        torch=torch.__version__,
        tensorflow=tf.__version__,
    )
    rows = [
        (
            "dynamic_eval_statistics",
            stats["tokens"] / stats["seconds"],
            ref["stat_tokens_per_s"],
        ),
        ("dynamic_eval_stream", dyn["tokens_per_s"], ref["tokens_per_s"]),
    ]
    label = torch_label("same algorithm")
    throughput = [
        record("throughput", name, "keras_rnnlm", value, "tok/s", ref_v, label)
        for name, value, ref_v in rows
    ]
    write_records(args, throughput, fields)
    name = args.name or (
        f"{os.path.basename(os.path.normpath(args.run))}_dynamic_{args.split}"
    )
    quality = record(
        "quality",
        name,
        config.name,
        dyn["ppl"],
        "ppl",
        static["ppl"],
        "static evaluation of the same weights/tokens",
        digits=4,
        ratio_digits=4,
    )
    write_records(args, [quality], fields, path=args.quality_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
