"""Batch-1 evaluation after training, with and without keras_rnnlm's glibc
malloc settings (keras_rnnlm/_malloc.py; issue #25).

Each process does what a run does: ``model.fit`` on an ``LMSequence``
(AWD-LSTM, the recipe preset's shape, random token ids; the steps after
the first two timed), then ``Evaluator.evaluate`` at the preset's
evaluation batch (``--windows`` / 10 windows) and at batch 1
(``--windows`` windows), each after an untimed one-window pass, in
``--passes`` timed passes. Settings of glibc's
allocator, one fresh process each, interleaved ``--processes`` times:

* ``tuned``: ``import keras_rnnlm`` sets one arena (the package's
  default);
* ``default``: ``KERAS_RNNLM_MALLOC=default``, glibc's own settings;
* ``tunables``: one arena given to glibc at process start
  (``GLIBC_TUNABLES``), the reference the import-time ``mallopt`` should
  match;
* ``two_arenas`` / ``one_arena``: two arenas / one (``GLIBC_TUNABLES``);
* ``arena_trim``: one arena and a 256 MiB trim threshold (the package's
  first setting), ``trim_only``: the threshold alone, both by
  ``mallopt`` in the bench before the import.

A process's figure is the median of its passes; a record holds each
setting's median over processes, every process's median and its passes,
and the processes' peak RSS.

    python bench/malloc_modes.py --threads 2 --processes 4 --passes 4
"""

import os
import statistics

import _harness as harness

MODES = {
    "tuned": {},
    "default": {"KERAS_RNNLM_MALLOC": "default"},
    "tunables": {"GLIBC_TUNABLES": "glibc.malloc.arena_max=1"},
    "two_arenas": {"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"},
    "one_arena": {"GLIBC_TUNABLES": "glibc.malloc.arena_max=1"},
    # Other settings, by mallopt here before the import.
    "arena_trim": {
        "KERAS_RNNLM_MALLOC": "default",
        "BENCH_MALLOPT": "arena,trim",
    },
    "trim_only": {"KERAS_RNNLM_MALLOC": "default", "BENCH_MALLOPT": "trim"},
}
PHASES = ("train", "eval_b10", "eval_b1")
VOCAB = 10000


def _bench_mallopt():
    """The ``arena_trim`` / ``trim_only`` settings, before keras_rnnlm's
    import (which leaves glibc alone in those processes)."""
    which = os.environ.get("BENCH_MALLOPT")
    if not which:
        return
    import ctypes  # noqa: I001  (only these settings need it)

    for name in which.split(","):
        param, value = {"arena": (-8, 1), "trim": (-1, 256 * 2**20)}[name]
        assert ctypes.CDLL(None).mallopt(param, value) == 1


def measure(mode, recipe, preset, train_windows, windows, passes):
    _bench_mallopt()
    import keras
    import numpy as np

    from keras_rnnlm.data.streams import LMSequence
    from keras_rnnlm.evaluation import Evaluator
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.models.weights import copy_weights
    from keras_rnnlm.recipe import config_from_preset
    from keras_rnnlm.recipe import load_recipe
    from keras_rnnlm.training import compile_model

    config = config_from_preset(
        load_recipe(os.path.join(harness.ROOT, recipe)).PRESETS, preset
    )
    d = config.data
    bptt = d.eval_bptt or d.bptt
    ids = np.random.default_rng(0).integers(0, VOCAB, 200_000).astype("int32")
    keras.utils.set_random_seed(0)
    model = build_language_model(config.model, VOCAB, d.batch_size, seed=0)
    compile_model(model, config.train)
    n = d.batch_size * (d.bptt * train_windows + 1)
    times = harness.fit_batch_times(
        model, LMSequence(ids[:n], d.batch_size, d.bptt)
    )
    # The first two steps (tracing, compilation) untimed.
    out = {
        "mode": mode,
        "train": (len(times) - 2)
        * d.batch_size
        * d.bptt
        / (times[-1] - times[1]),
    }
    for phase, batch, n_windows in (
        ("eval_b10", d.eval_batch_size, windows // 10),
        ("eval_b1", 1, windows),
    ):
        ev = Evaluator(config.model, VOCAB, batch, bptt)
        copy_weights(model, ev.model)
        ev.evaluate(ids[: batch * (bptt + 1)])
        tokens = n_windows * bptt * batch
        rates = out[phase + "_passes"] = []
        out[phase] = harness.median_rate(
            lambda e=ev, n=tokens + batch: e.evaluate(ids[:n]),
            tokens,
            passes,
            rates,
        )
    return out


def main():
    p = harness.paired_parser(
        __doc__,
        "malloc.jsonl",
        list(MODES),
        6,
        threads=2,
        repeats_help="fresh processes of each setting, interleaved",
    )
    p.set_defaults(impls=list(MODES))
    p.add_argument("--processes", dest="repeats", type=int)
    p.add_argument("--recipe", default="recipes/awd_lstm_ptb.py")
    p.add_argument("--preset", default="cpu")
    p.add_argument("--train-windows", type=int, default=12)
    p.add_argument("--windows", type=int, default=320)
    p.add_argument("--passes", type=int, default=6)
    args = harness.parse(p, measure)
    for mode in args.impls:
        if mode not in MODES:
            p.error(f"unknown setting {mode!r}; choose from {list(MODES)}")
    params = {
        "recipe": args.recipe,
        "preset": args.preset,
        "train_windows": args.train_windows,
        "windows": args.windows,
        "passes": args.passes,
    }

    def measure_one(mode):
        env = harness.thread_env(args.threads, **MODES[mode])
        return harness.run_child(__file__, dict(params, mode=mode), env)

    def report(rep, mode, r):
        rates = ", ".join(f"{x:,.0f}" for x in r["eval_b1_passes"])
        print(
            f"[{rep}] {mode:10s} ({r['malloc']}) train {r['train']:6,.0f} "
            f"b10 {r['eval_b10']:7,.0f} b1 {r['eval_b1']:7,.0f} tok/s "
            f"(b1 passes {rates})  rss {r['rss_mb']:.0f} MB  load "
            f"{r['load_average']:.2f}",
            flush=True,
        )

    samples = harness.interleave(args.impls, args.repeats, measure_one, report)
    fields = harness.record_fields(
        "malloc_modes.py",
        threads=args.threads or None,
        inter_op_threads=args.threads or "default",
    )
    name = os.path.basename(args.recipe).split("_ptb")[0]
    ref = samples.get("default")
    records = []
    for mode, runs in samples.items():
        line = f"{mode:10s}"
        for phase in (*PHASES, "rss_mb"):
            value = statistics.median(r[phase] for r in runs)
            ref_value = ref and statistics.median(r[phase] for r in ref)
            extra = {}
            if phase in PHASES:
                extra["process_medians"] = [round(r[phase], 1) for r in runs]
            if phase not in ("train", "rss_mb"):
                extra["pass_rates"] = [
                    [round(x, 1) for x in r[phase + "_passes"]] for r in runs
                ]
            records.append(
                harness.record(
                    "memory" if phase == "rss_mb" else "throughput",
                    f"{name}_ptb_{args.preset}_{phase}_malloc",
                    f"keras_malloc_{mode}",
                    value,
                    "MB" if phase == "rss_mb" else "tok/s",
                    ref_value,
                    "same, glibc's malloc defaults "
                    "(KERAS_RNNLM_MALLOC=default)",
                    **harness.malloc_fields(runs, ref),
                    **extra,
                    load_averages=[round(r["load_average"], 2) for r in runs],
                    **params,
                )
            )
            line += f"  {phase} {value:8,.0f}"
            if ref_value:
                line += f" ({value / ref_value:.2f}x)"
        print(line)
    harness.write_records(args, records, fields)


if __name__ == "__main__":
    main()
