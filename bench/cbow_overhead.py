"""Cost of the CBOW long-term context module, in tokens/s.

The small WikiText-2 model of ``recipes/cbow_wt2.py``
(:func:`keras_rnnlm.presets.cbow_lstm.cbow_preset`: vocabulary 33,278,
embedding 100, one LSTM of 200, dropout 0.5, softmax; SGD with global
clipping; batch 20, windows of 35 tokens, stateful) on random token ids,
in these variants (``--impls``):

* ``none``: the vanilla model (the reference of every ratio);
* ``uniform``, ``positional``, ``idf``: the model with the module
  (``model.context.weighting``; K = 100; the IDF vector set to random
  positive values);
* ``none_sentence`` (any ``WEIGHTING_sentence``): sentence-level
  training (``data.state_reset = "sentence"``): the model also reads the
  reset mask (one sentence start every 25 tokens on average), and its
  LSTM runs the per-step masked loop instead of the fused one.

Training is one compiled ``train_on_batch`` a step on the training
model; evaluation one ``test_on_batch`` a step on the package's
:class:`~keras_rnnlm.evaluation.Evaluator` model (forward-only loops,
batch 20 as the preset's ``eval_batch_size``).

One child process per thread setting (``--threads``, 0: TensorFlow's
defaults) builds every variant, warms each up (tracing), then runs
``--rounds`` rounds; a round times one pass of ``--steps`` training
steps and one of ``--eval-steps`` evaluation steps of every variant in
turn, so the variants are interleaved and a slow spell of the machine
hits them alike. The figures are medians over the rounds. Records (one
per variant, phase and thread setting, with the load averages at the
start and the end of the child) go to ``bench/results/cbow.jsonl``.

    python -m bench.cbow_overhead                     # ~7 min, 2 cores
    python -m bench.cbow_overhead --threads 1 --rounds 1 --steps 2 \\
        --eval-steps 2 --no-record                    # a quick check
"""

import os
import statistics
import time

from bench.harness.options import add_child_argument
from bench.harness.options import add_output_arguments
from bench.harness.options import bench_parser
from bench.harness.options import parse
from bench.harness.processes import interleave
from bench.harness.processes import note_import_rss
from bench.harness.processes import run_child
from bench.harness.processes import thread_env
from bench.harness.processes import vs
from bench.harness.records import record
from bench.harness.records import record_fields
from bench.harness.records import write_records

#: This bench (its children run ``python -m bench.cbow_overhead --child``).
MODULE = "bench.cbow_overhead"

VOCAB, BATCH, BPTT = 33278, 20, 35
WEIGHTINGS = ("none", "uniform", "positional", "idf")
IMPLS = ("none", "uniform", "positional", "idf", "none_sentence")
#: Mean sentence length of the random reset masks (WikiText-2's
#: sentences are about this long).
SENTENCE_LENGTH = 25


def parse_impl(impl):
    """``(weighting, level)`` of a variant name."""
    weighting, _, level = impl.partition("_")
    if weighting not in WEIGHTINGS or level not in ("", "sentence"):
        raise ValueError(
            f"Unknown variant {impl!r}: WEIGHTING or WEIGHTING_sentence "
            f"with WEIGHTING in {WEIGHTINGS}"
        )
    return weighting, level or "discourse"


def build_variant(impl, rng):
    """The compiled training model and the evaluation model of one
    variant, and their inputs: ``(train_model, eval_model, x, y)``."""
    from keras_rnnlm.config import RunConfig
    from keras_rnnlm.evaluation import Evaluator
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.presets.cbow_lstm import cbow_preset
    from keras_rnnlm.training import compile_model

    weighting, level = parse_impl(impl)
    config = RunConfig.from_dict(cbow_preset("small", weighting, level))
    sentence = level == "sentence"
    model = build_language_model(
        config.model, VOCAB, BATCH, seed=0, reset_input=sentence
    )
    compile_model(model, config.train)
    # the Evaluator's model: forward-only loops, the reset mask if any
    # (the starts function is not called: batches are fed directly)
    evaluator = Evaluator(
        config.model,
        VOCAB,
        BATCH,
        BPTT,
        sentence_starts=(lambda ids: None) if sentence else None,
    )
    if weighting == "idf":
        idf = rng.uniform(0.5, 12.0, VOCAB).astype("float32")
        for m in (model, evaluator.model):
            m.get_layer("cbow_context").set_idf(idf)
    x = rng.integers(0, VOCAB, (BATCH, BPTT), "int32")
    y = rng.integers(0, VOCAB, (BATCH, BPTT), "int32")
    if sentence:
        reset = rng.random((BATCH, BPTT)) < 1.0 / SENTENCE_LENGTH
        x = {"tokens": x, "reset": reset.astype("float32")}
    return model, evaluator.model, x, y


def measure(impls, rounds, steps, eval_steps):
    """Child: tokens/s of every variant (interleaved rounds)."""
    import numpy as np

    note_import_rss()
    load_start = os.getloadavg()
    rng = np.random.default_rng(0)
    built = {impl: build_variant(impl, rng) for impl in impls}
    t = time.perf_counter()
    for model, ev_model, x, y in built.values():
        for _ in range(2):  # tracing, then one step at speed
            model.train_on_batch(x, y)
            ev_model.test_on_batch(x, y)
    warm_s = time.perf_counter() - t
    tokens = BATCH * BPTT

    def one_round(impl):
        model, ev_model, x, y = built[impl]
        out = {}
        for phase, fn, n in (
            ("train", model.train_on_batch, steps),
            ("eval", ev_model.test_on_batch, eval_steps),
        ):
            t = time.perf_counter()
            for _ in range(n):
                fn(x, y)
            out[phase] = n * tokens / (time.perf_counter() - t)
        return out

    samples = interleave(impls, rounds, one_round)
    result = {
        impl: {
            phase: statistics.median(r[phase] for r in runs)
            for phase in ("train", "eval")
        }
        for impl, runs in samples.items()
    }
    params = {impl: int(b[0].count_params()) for impl, b in built.items()}
    return {
        "rates": result,
        "params": params,
        "warm_s": warm_s,
        "load_start": [round(v, 2) for v in load_start],
        "load_end": [round(v, 2) for v in os.getloadavg()],
    }


def parser():
    p = bench_parser(MODULE, __doc__)
    p.add_argument("--impls", nargs="+", default=list(IMPLS))
    p.add_argument(
        "--threads",
        nargs="+",
        type=int,
        default=[1, 2, 0],
        help="thread settings, one child each (TensorFlow's intra- and "
        "inter-op pools; 0: its defaults; default: %(default)s)",
    )
    p.add_argument(
        "--rounds", type=int, default=3, help="interleaved timed rounds"
    )
    p.add_argument(
        "--steps", type=int, default=5, help="training steps a round"
    )
    p.add_argument(
        "--eval-steps", type=int, default=4, help="evaluation steps a round"
    )
    p.add_argument(
        "--note",
        default="",
        help="recorded with every record (e.g. what else ran on the machine)",
    )
    add_output_arguments(p, "cbow.jsonl")
    add_child_argument(p)
    return p


def thread_records(args, threads):
    """Runs the child of one thread setting; returns its records."""
    r = run_child(
        MODULE,
        {
            "impls": args.impls,
            "rounds": args.rounds,
            "steps": args.steps,
            "eval_steps": args.eval_steps,
        },
        thread_env(threads, interop=0),
    )
    ref, label = r["rates"]["none"], threads or "default"
    print(
        f"threads {label}: load {r['load_start']} -> {r['load_end']}, "
        f"warm-up {r['warm_s']:.0f} s, child {r['wall_s']:.0f} s",
        flush=True,
    )
    records = []
    for impl in args.impls:
        m = r["rates"][impl]
        for phase in ("train", "eval"):
            records.append(
                record(
                    "throughput",
                    f"cbow_wt2_small_{phase}",
                    impl,
                    m[phase],
                    "tok/s",
                    ref[phase],
                    "vanilla model (none), same process, interleaved",
                    threads=label,
                    ms_per_step=round(1000 * BATCH * BPTT / m[phase], 1),
                    overhead_pct=round(100 * (ref[phase] / m[phase] - 1), 1),
                    params=r["params"][impl],
                    rounds=args.rounds,
                    steps=args.steps if phase == "train" else args.eval_steps,
                    load_start=r["load_start"],
                    load_end=r["load_end"],
                    note=args.note,
                )
            )
        print(
            f"  {impl:16s} train {m['train']:7.0f} tok/s "
            f"({1000 * BATCH * BPTT / m['train']:6.1f} ms/step)  "
            f"eval {m['eval']:7.0f} tok/s" + vs(m, ref, "none"),
            flush=True,
        )
    return records


def main(argv=None):
    p = parser()
    args = parse(p, measure, argv)
    for impl in args.impls:
        parse_impl(impl)
    if "none" not in args.impls:
        p.error("--impls needs 'none' (the reference of the ratios)")
    fields = record_fields(MODULE, argv)
    start, records = time.perf_counter(), []
    for threads in args.threads:
        records += thread_records(args, threads)
    print(f"total {time.perf_counter() - start:.0f} s")
    write_records(args, records, fields)


if __name__ == "__main__":
    main()
