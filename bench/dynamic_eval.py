"""Dynamic evaluation speed and quality, Keras vs PyTorch side by side.

Runs Krause et al.'s RMS dynamic evaluation (the package's
:class:`~keras_rnnlm.evaluation.dynamic.DynamicEvaluator`, a named preset)
on a trained LSTM run (embedding -> LSTMs -> softmax, e.g. the Zaremba
small PTB run), and the same algorithm written directly in PyTorch 2.13
CPU on the same weights and the same batches in the same process:

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

import argparse
import math
import os
import sys
import time
import types

import numpy as np

from bench.harness import RESULTS
from bench.harness.options import add_output_arguments
from bench.harness.options import add_threads_argument
from bench.harness.processes import set_threads
from bench.harness.records import record
from bench.harness.records import record_fields
from bench.harness.records import write_records


def keras_side(args, corpus, config):
    from keras_rnnlm.evaluation.dynamic import DynamicEvaluator
    from keras_rnnlm.evaluation.static import Evaluator

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
    import torch
    from scoring import torch_model

    from keras_rnnlm.data.streams import LMSequence

    m = torch_model(types.SimpleNamespace(model=ev.model))
    for name, p in m.named_parameters():
        # Keras holds one bias per LSTM (copied into bias_ih): the other
        # stays zero and is not adapted, so both sides adapt 2L + 3 tensors.
        p.requires_grad_(not name.startswith("lstm.bias_hh"))
    params = [p for p in m.parameters() if p.requires_grad]

    def loss_of(x, y, w, hidden):
        logits, hidden = m.step(torch.from_numpy(x.T).long(), hidden)
        lp = torch.log_softmax(logits, -1)
        nll = -lp.gather(-1, torch.from_numpy(y.T).long()[..., None])[..., 0]
        w = torch.from_numpy(w.T)
        return (nll * w).sum(), w.sum(), hidden

    def detach(h):
        return tuple(t.detach() for t in h)

    # 1. Gradient statistics.
    train = LMSequence(corpus.train, ev.grad_batch_size, ev.grad_bptt)
    n = len(train)
    if ev.grad_batches is not None:
        n = min(n, ev.grad_batches)
    sums = [torch.zeros_like(p) for p in params]
    hidden, tokens = None, 0
    t0 = time.perf_counter()
    for i in range(n):
        x, y, w = train[i]
        total, count, hidden = loss_of(x, y, w, hidden)
        m.zero_grad()
        (total / count).backward()
        with torch.no_grad():
            for s, p in zip(sums, params):
                s += p.grad * p.grad
        hidden = detach(hidden)
        tokens += int(count)
    stat_s = time.perf_counter() - t0
    if ev.statistics == "sum":
        ms = [torch.sqrt(s) for s in sums]
        norm = sum(float(x.mean()) for x in ms)
    else:
        ms = [torch.sqrt(s / n) for s in sums]
        norm = float(np.mean([float(x.mean()) for x in ms]))
    decrate = [x / norm for x in ms]
    if ev.lamb > 0:
        decrate = [torch.clamp(d, max=1.0 / ev.lamb) for d in decrate]
    print(f"torch statistics: {n} batches, {tokens / stat_s:.0f} tok/s")

    # 2. Score each segment, then update.
    theta0 = [p.detach().clone() for p in params]
    # Loop invariants computed once (in-place updates: the fastest eager
    # form of the rule).
    decay = [ev.lamb * d for d in decrate]
    denom = [s + ev.epsilon for s in ms]
    stream = LMSequence(ids, 1, ev.bptt)
    hidden, nll_sum, count_sum = None, 0.0, 0.0
    t0 = time.perf_counter()
    for i in range(len(stream)):
        x, y, w = stream[i]
        total, count, hidden = loss_of(x, y, w, hidden)
        m.zero_grad()
        (total / count).backward()
        nll_sum += float(total.detach())
        count_sum += float(count)
        with torch.no_grad():
            for p, p0, d, s in zip(params, theta0, decay, denom):
                p.add_(d * (p0 - p)).addcdiv_(p.grad, s, value=-ev.lr)
        hidden = detach(hidden)
    dyn_s = time.perf_counter() - t0
    with torch.no_grad():
        for p, p0 in zip(params, theta0):
            p.copy_(p0)
    ppl = math.exp(nll_sum / count_sum)
    print(f"torch dynamic: ppl {ppl:.3f}, {count_sum / dyn_s:.0f} tok/s")
    return {
        "stat_tokens_per_s": tokens / stat_s,
        "tokens_per_s": count_sum / dyn_s,
        "ppl": ppl,
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
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
    args = p.parse_args(argv)
    import tensorflow as tf
    import torch

    set_threads(args.threads, torch)

    from keras_rnnlm.runs import open_run

    config, corpus = open_run(args.run)
    ev, ids, stats, dyn, static = keras_side(args, corpus, config)
    ref = torch_side(ev, corpus, ids)

    fields = record_fields("bench.dynamic_eval",
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
    throughput = [
        record(
            "throughput",
            name,
            "keras_rnnlm",
            value,
            "tok/s",
            torch_value,
            "same algorithm in PyTorch 2.13 CPU",
        )
        for name, value, torch_value in rows
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
