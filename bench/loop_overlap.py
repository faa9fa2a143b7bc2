"""Do the row blocks of a compiled loop run at the same time? Per pool setting.

The package runs each fused recurrent loop as concurrent row blocks
(``keras_rnnlm.loops.loop_parts``): one XLA-compiled call per block, which
TensorFlow's executor starts on its inter-op threads. This bench asks
whether the blocks overlap, and what TensorFlow's intra-op pool does to
that, on the Zaremba LSTM's loops (2 layers' worth of forward and backward
loops is what a training step runs; here one layer's forward + backward,
``lstm_recurrence``'s compiled loops called directly):

* ``whole``: one call on the whole batch;
* ``blocks``: two calls on half the rows each (``run_in_parts``), and
* ``half``: one call on half the rows (what each block costs alone),

each in fresh processes with TensorFlow's pools set to
``intra/inter`` = ``1/1`` (one thread: the reference), ``2/2`` (two
threads, the package's setting) and ``1/2`` (one intra-op thread, two
inter-op). Each child also times a whole Zaremba training step and its
parts (``bench/scaling.py``'s ``measure_keras``), and counts the process's
context switches per loop call (``getrusage``: every thread's voluntary
and involuntary switches). Settings are interleaved over ``--repeats``;
medians are reported.

Records (kind ``latency``, ms; the reference is the same part at ``1/1``,
so ``ratio`` below 1 is the speed-up from one thread) go to
``bench/results/loop_overlap.jsonl``.

    python bench/loop_overlap.py --sizes small --repeats 3
"""

import resource
import statistics
import sys

import _harness as harness

SETTINGS = ("1/1", "2/2", "1/2")
SIZES = {"small": (20, 200, 20), "medium": (20, 650, 35)}  # batch, units, steps
LOOPS = ("whole", "blocks", "half")


def _switches():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_nvcsw + r.ru_nivcsw


def _loop_parts_ms(size, calls):
    """{loop: ms of one forward + backward}, {loop: switches a call}."""
    import numpy as np
    import tensorflow as tf

    from keras_rnnlm.loops import recurrence
    from keras_rnnlm.loops.loop_parts import run_in_parts

    batch, units, steps = SIZES[size]
    forward, backward, _ = recurrence._compiled()
    rng = np.random.default_rng(0)

    def const(*shape, scale=1.0):
        return tf.constant((rng.normal(size=shape) * scale).astype("float32"))

    proj, d_out = const(steps, batch, 4 * units), const(steps, batch, units)
    h0, c0 = const(batch, units), const(batch, units)
    kernel = const(units, 4 * units, scale=0.05)

    def loops(parts, rows):
        def run(proj, h0, c0, d_out):
            proj, h0, c0, d_out = (
                proj[:, :rows],
                h0[:rows],
                c0[:rows],
                d_out[:, :rows],
            )
            h, c, g = run_in_parts(
                forward,
                parts,
                (proj, h0, c0, kernel),
                (1, 0, 0, None),
                (1, 1, 1),
            )
            zero = h[-1] * 0.0
            return run_in_parts(
                backward,
                parts,
                (h0, c0, kernel, h, c, g, d_out, zero, zero),
                (0, 0, None, 1, 1, 1, 1, 0, 0),
                (1, 0, 0),
            )

        return tf.function(run)

    fns = {
        "whole": loops(1, batch),
        "blocks": loops(2, batch),
        "half": loops(1, batch // 2),
    }
    ms, switches = {}, {}
    for name, fn in fns.items():
        fn(proj, h0, c0, d_out)[0].numpy()
        before = _switches()
        ms[name] = harness.median_ms(
            lambda fn=fn: fn(proj, h0, c0, d_out),
            calls,
            lambda out: out[0].numpy(),
        )
        switches[name] = (_switches() - before) / calls
    return ms, switches


def measure(size, calls):
    import scaling

    loops_ms, switches = _loop_parts_ms(size, calls)
    step = scaling.measure_keras(size, 20)
    return {
        "loops_ms": loops_ms,
        "switches": switches,
        "parts_ms": step["parts_ms"],
    }


def _env(setting):
    intra, inter = (int(n) for n in setting.split("/"))
    return harness.thread_env(intra, interop=inter)


def _report(samples, size):
    """Prints the medians; returns the records."""

    def med(setting, group, name):
        return statistics.median(r[group][name] for r in samples[setting])

    records = []
    rows = [(g, n) for g in ("loops_ms",) for n in LOOPS]
    rows += [("parts_ms", p) for p in ("step", "rnn", "decoder")]
    for group, name in rows:
        ref = med("1/1", group, name)
        cells = []
        for setting in SETTINGS:
            value = med(setting, group, name)
            cells.append(f"{setting} {value:7.3f}")
            extra = {}
            if group == "loops_ms":
                extra["switches_per_call"] = round(
                    med(setting, "switches", name), 1
                )
            records.append(
                harness.record(
                    "latency",
                    f"loop_overlap_{size}_{name}_{setting.replace('/', '_')}",
                    "tensorflow",
                    value,
                    "ms",
                    ref,
                    "the same at intra/inter-op 1/1, same run",
                    digits=3,
                    intra_op=int(setting.split("/")[0]),
                    inter_op=int(setting.split("/")[1]),
                    **extra,
                )
            )
        print(f"{size} {name:8s} " + "  ".join(cells), flush=True)
    for setting in SETTINGS:
        sw = "  ".join(f"{n} {med(setting, 'switches', n):7.1f}" for n in LOOPS)
        print(f"{size} switches a call at {setting}: {sw}", flush=True)
    return records


def main():
    parser = harness.paired_parser(
        __doc__, "loop_overlap.jsonl", ("keras",), repeats=3
    )
    parser.add_argument("--sizes", nargs="+", default=["small"])
    parser.add_argument("--calls", type=int, default=40)
    args = harness.parse(parser, measure)
    fields = harness.record_fields("loop_overlap.py")
    records = []
    for size in args.sizes:
        samples = harness.interleave(
            SETTINGS,
            args.repeats,
            lambda s, size=size: harness.run_child(
                __file__, {"size": size, "calls": args.calls}, _env(s)
            ),
            lambda rep, s, r, size=size: print(
                size, rep, s, r["loops_ms"], flush=True
            ),
        )
        records += _report(samples, size)
    harness.write_records(args, records, fields)


if __name__ == "__main__":
    sys.exit(main())
