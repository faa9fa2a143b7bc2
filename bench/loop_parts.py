"""Does splitting the recurrent loops into row blocks pay on this machine?

The package runs each fused recurrent loop as concurrent row blocks where
it expects a gain (``keras_rnnlm.loops.loop_parts``: one block an inter-op
thread, none where a step is large); the rule was measured on one CPU
class. This bench checks it on the machine it runs on, and belongs in
the first runs on a new CPU class.

    python -m bench.loop_parts --recipe recipes/awd_lstm_ptb.py \\
        --preset cpu --threads 2 --rounds 8

Builds the preset's model twice in one process, once with the loops split
into row blocks turned off (``KERAS_RNNLM_LOOP_PARTS=1``) and once with the
package's choice (``keras_rnnlm.loops.loop_parts``; the variable is read
when a step is traced), and times, interleaved over ``--rounds`` rounds of
``--calls`` calls each (medians reported):

* ``train``: ``train_on_batch`` at the preset's batch and ``bptt``;
* ``eval_bN``: ``test_on_batch`` of a forward-only model (what the
  package's ``Evaluator`` runs) at each ``--eval-batches`` size, windows of
  ``eval_bptt``.

Random token ids; ``--threads`` sets TensorFlow's intra- and inter-op
pools (0: the defaults, all cores). One record per phase (kind
``throughput``, unit tok/s, the reference being the loops unsplit) is
appended to ``bench/results/loop_parts.jsonl`` (``--out``).
"""

import os
import statistics
import time

import numpy as np

from bench.harness.options import add_output_arguments
from bench.harness.options import add_threads_argument
from bench.harness.options import bench_parser
from bench.harness.processes import set_threads
from bench.harness.records import record
from bench.harness.records import record_fields
from bench.harness.records import write_records

MODULE = "bench.loop_parts"
ENV = "KERAS_RNNLM_LOOP_PARTS"


def _build(config, vocab, batch, forward_only):
    from keras_rnnlm.loops.recurrence import set_forward_only
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.training import compile_model

    model = build_language_model(
        config.model, vocab, batch, seed=config.train.seed
    )
    if forward_only:
        set_forward_only(model)
    compile_model(model, config.train)
    return model


def parser():
    p = bench_parser(MODULE, __doc__)
    p.add_argument("--recipe", required=True)
    p.add_argument("--preset", default="cpu")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--calls", type=int, default=10, help="calls a round")
    p.add_argument(
        "--eval-batches", nargs="+", type=int, default=[10, 1], metavar="B"
    )
    p.add_argument("--vocab", type=int, default=10000)
    add_threads_argument(p, default=0)
    add_output_arguments(p, "loop_parts.jsonl")
    return p


def traced_calls(config, phases, vocab):
    """``{(phase, setting): (call, tokens a call)}``: each phase's model
    traced with the split off (``off``) and as the package chooses
    (``auto``)."""

    rng = np.random.default_rng(0)
    calls = {}
    for setting in ("off", "auto"):
        if setting == "off":
            os.environ[ENV] = "1"
        else:
            os.environ.pop(ENV, None)
        for phase, (batch, bptt, forward_only) in phases.items():
            model = _build(config, vocab, batch, forward_only)
            x = rng.integers(0, vocab, (batch, bptt)).astype("int32")
            fn = model.test_on_batch if forward_only else model.train_on_batch
            fn(x, x)  # traced here, with this setting
            calls[phase, setting] = (lambda fn=fn, x=x: fn(x, x), batch * bptt)
    os.environ.pop(ENV, None)
    return calls


def interleaved_seconds(calls, rounds, n):
    """Seconds a call of each key: one list a key, ``rounds`` rounds of
    ``n`` calls (after one untimed), the keys interleaved."""
    times = {key: [] for key in calls}
    for _ in range(rounds):
        for key, (fn, _) in calls.items():
            fn()
            start = time.perf_counter()
            for _ in range(n):
                fn()
            times[key].append((time.perf_counter() - start) / n)
    return times


def main(argv=None):
    args = parser().parse_args(argv)
    set_threads(args.threads)

    from keras_rnnlm.loops.loop_parts import inter_op_threads
    from keras_rnnlm.recipe import config_from_preset
    from keras_rnnlm.recipe import load_recipe

    config = config_from_preset(load_recipe(args.recipe).PRESETS, args.preset)
    d = config.data
    phases = {"train": (d.batch_size, d.bptt, False)}
    for b in args.eval_batches:
        phases[f"eval_b{b}"] = (b, d.eval_bptt or d.bptt, True)
    calls = traced_calls(config, phases, args.vocab)
    times = interleaved_seconds(calls, args.rounds, args.calls)
    threads = args.threads or "default"
    fields = record_fields(
        MODULE,
        argv,
        threads=threads,
        inter_op_threads=inter_op_threads(),
        recipe=args.recipe,
        preset=args.preset,
        rounds=args.rounds,
    )
    model = os.path.basename(args.recipe).removesuffix(".py")
    records = []
    for phase in phases:
        tokens = calls[phase, "auto"][1]
        on = tokens / statistics.median(times[phase, "auto"])
        off = tokens / statistics.median(times[phase, "off"])
        print(
            f"{phase:9s} split {on:9.1f} tok/s  unsplit {off:9.1f}  "
            f"x{on / off:.3f}",
            flush=True,
        )
        records.append(
            record(
                "throughput",
                f"loop_parts_{phase}_t{threads}",
                f"{model} {args.preset}",
                on,
                "tok/s",
                reference=off,
                reference_name="loops unsplit",
                batch=phases[phase][0],
            )
        )
    write_records(args, records, fields)


if __name__ == "__main__":
    main()
