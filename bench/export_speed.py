"""Speed of the two SavedModel variants: the default export (the generic
recurrent loop, no XLA) against ``--xla`` (the fused, XLA-compiled loop).

    python -m bench.export_speed [--size medium] [--sentences 128]
        [--latency-calls 40] [--thread-settings 1 2 0] [--repeats 2]

One untrained Zaremba-sized model (PTB's 10k words, ``--size medium``:
650 units, 2 layers, seed 0) is exported twice, by a child process, with
``export_saved_model(scorer, path)`` and ``export_saved_model(scorer,
path, xla=True)`` (what ``keras-rnnlm export`` and ``keras-rnnlm export
--xla`` write). Each measurement then loads one variant in a fresh
process that imports only TensorFlow and tensorflow-text, and calls
``score_text`` on the first ``--sentences`` PTB test sentences in corpus
order:

* throughput: batches of 32 (what a batching server sends), one untimed
  pass (the XLA variant compiles one program per shape) then the median
  tokens/s (``<eos>`` included) of 3 timed passes;
* latency: ``--latency-calls`` one-sentence calls (the first sentences),
  one untimed pass, then the p50 and p90 of one timed pass.

``--thread-settings``: TensorFlow's intra-op and inter-op pools both set
to N for each N (0: TensorFlow's defaults, no variable set); each child
reports the values it ran with (0: TensorFlow chooses, one thread per
core). The repeats are interleaved (both
variants at every setting, then again), and each record holds the
median over them with every run's figure. The machine's 1-minute load
average is recorded per run (a shared machine: compare records only
with their load). Records go to ``bench/results/export.jsonl``.
"""

import os
import statistics
import tempfile
import time

from bench.harness.options import paired_parser
from bench.harness.options import parse
from bench.harness.processes import interleave
from bench.harness.processes import medians
from bench.harness.processes import note_import_rss
from bench.harness.processes import run_child
from bench.harness.processes import thread_env
from bench.harness.records import record
from bench.harness.records import record_fields
from bench.harness.records import write_records
from bench.harness.timing import median_rate

#: This bench (its children run ``python -m bench.export_speed --child``).
MODULE = "bench.export_speed"

SIZES = {"small": 200, "medium": 650, "large": 1500}
VARIANTS = ("default", "xla")
BATCH = 32


def ptb_test_path():
    from keras_rnnlm.data import resolve_corpus_files

    return os.fspath(resolve_corpus_files("ptb", download=False)["test"])


def read_sentences(path, n):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                out.append(line.strip())
            if len(out) == n:
                break
    return out


# -- children ----------------------------------------------------------------


def export_both(base, size):
    """(child) Both variants of one random-weight model under ``base``."""
    from keras_rnnlm.config import ModelConfig
    from keras_rnnlm.data import load_corpus
    from keras_rnnlm.export import export_saved_model
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.scoring import Scorer

    vocab = load_corpus("ptb", download=False).vocab
    hidden = SIZES[size]
    cfg = ModelConfig(embedding_dim=hidden, hidden_sizes=[hidden, hidden])
    model = build_language_model(cfg, len(vocab), None, stateful=False, seed=0)
    scorer = Scorer(model, vocab)
    seconds = {}
    for variant in VARIANTS:
        t = time.perf_counter()
        export_saved_model(
            scorer, os.path.join(base, variant, "1"), xla=variant == "xla"
        )
        seconds[variant] = round(time.perf_counter() - t, 1)
    return {"export_seconds": seconds}


def score_speed(path, sentences_file, sentences, latency_calls):
    """(child) Throughput at batch 32 and one-sentence latency of
    ``score_text`` of the export at ``path``."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer op)

    note_import_rss()
    if os.environ.get("BENCH_THREADS"):
        # Also set in the context, so that its getters report them.
        threading = tf.config.threading
        threading.set_intra_op_parallelism_threads(
            int(os.environ["BENCH_THREADS"])
        )
        threading.set_inter_op_parallelism_threads(
            int(os.environ["BENCH_INTEROP_THREADS"])
        )
    rows = read_sentences(sentences_file, sentences)
    t = time.perf_counter()
    fn = tf.saved_model.load(path).signatures["score_text"]
    load_s = time.perf_counter() - t
    batches = [
        tf.constant(rows[i : i + BATCH]) for i in range(0, len(rows), BATCH)
    ]
    singles = [tf.constant([s]) for s in rows[:latency_calls]]

    t = time.perf_counter()
    tokens = 0
    first = None
    for b in batches:
        out = fn(sentences=b)
        tokens += int(out["num_tokens"].numpy().sum())
        if first is None:
            first = out["ln_prob"].numpy().tolist()
    warm_batches_s = time.perf_counter() - t

    def one_pass():
        for b in batches:
            fn(sentences=b)

    rate = median_rate(one_pass, tokens)

    t = time.perf_counter()
    for s in singles:
        fn(sentences=s)
    warm_singles_s = time.perf_counter() - t
    times = []
    for s in singles:
        t = time.perf_counter()
        fn(sentences=s)
        times.append(1000.0 * (time.perf_counter() - t))
    deciles = statistics.quantiles(times, n=10, method="inclusive")
    threading = tf.config.threading
    return {
        "tokens_per_s": rate,
        "p50_ms": statistics.median(times),
        "p90_ms": deciles[8],
        "tokens": tokens,
        "load_s": round(load_s, 2),
        "first_pass_batches_s": round(warm_batches_s, 2),
        "first_pass_singles_s": round(warm_singles_s, 2),
        "tf_intra_op": threading.get_intra_op_parallelism_threads(),
        "tf_inter_op": threading.get_inter_op_parallelism_threads(),
        "ln_prob_first_batch": first,
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }


def measure(impl, **params):
    if impl == "export":
        return export_both(**params)
    return score_speed(**params)


# -- parent ------------------------------------------------------------------


def parser():
    p = paired_parser(
        MODULE, __doc__, "export.jsonl", VARIANTS, repeats=2, threads=None
    )
    p.add_argument("--size", choices=sorted(SIZES), default="medium")
    p.add_argument("--sentences", type=int, default=128)
    p.add_argument("--latency-calls", type=int, default=40)
    p.add_argument(
        "--thread-settings",
        type=int,
        nargs="+",
        default=[1, 2, 0],
        help="TensorFlow intra-op = inter-op threads of each setting "
        "(0: TensorFlow's defaults)",
    )
    return p


def main(argv=None):
    p = parser()
    args = parse(p, measure, argv)
    if args.threads is not None:
        p.error("use --thread-settings")
    if args.latency_calls < 2 or args.sentences < args.latency_calls:
        p.error("need 2 <= --latency-calls <= --sentences")
    script = MODULE
    sentences_file = ptb_test_path()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench_export_") as tmp:
        exported = run_child(
            script,
            {"impl": "export", "base": tmp, "size": args.size},
            thread_env(0),
        )
        print(f"exported both variants: {exported['export_seconds']} s")
        runs = {}
        for threads in args.thread_settings:
            env = thread_env(threads, interop=threads)

            def one(variant, env=env):
                return run_child(
                    script,
                    {
                        "impl": variant,
                        "path": os.path.join(tmp, variant, "1"),
                        "sentences_file": sentences_file,
                        "sentences": args.sentences,
                        "latency_calls": args.latency_calls,
                    },
                    env,
                )

            def report(rep, variant, r, threads=threads):
                print(
                    f"threads {threads or 'default'} run {rep + 1} "
                    f"{variant:7s}: batch 32 {r['tokens_per_s']:7.0f} tok/s"
                    f", one sentence p50 {r['p50_ms']:6.1f} ms p90 "
                    f"{r['p90_ms']:6.1f} ms (load {r['load_average']:.2f})",
                    flush=True,
                )

            runs[threads] = (
                env,
                interleave(args.impls, args.repeats, one, report),
            )
    print(f"total {time.perf_counter() - started:.0f} s")
    records = build_records(args, runs, exported)
    write_records(
        args,
        records,
        record_fields(
            MODULE,
            argv,
            model_desc=f"zaremba {args.size}, random weights",
            sentences=args.sentences,
            latency_calls=args.latency_calls,
            export_seconds=exported["export_seconds"],
            note="machine shared with a training run on one of its cores",
        ),
    )


def build_records(args, runs, exported):
    records = []
    for threads, (env, samples) in runs.items():
        med = medians(samples, ("tokens_per_s", "p50_ms", "p90_ms"))
        ref = med.get("default")
        for variant, results in samples.items():
            m = med[variant]
            last = results[-1]
            common = {
                "threads_setting": threads or "default",
                "tf_intra_op_env": env.get("TF_NUM_INTRAOP_THREADS"),
                "tf_inter_op_env": env.get("TF_NUM_INTEROP_THREADS"),
                "tf_intra_op": last["tf_intra_op"],
                "tf_inter_op": last["tf_inter_op"],
                "repeats": len(results),
                "load_averages": [r["load_average"] for r in results],
                "tokens": last["tokens"],
                "first_pass_batches_s": [
                    r["first_pass_batches_s"] for r in results
                ],
                "rss_mb": round(max(r["rss_mb"] for r in results), 1),
            }
            if variant != "default" and "default" in samples:
                first = samples["default"][-1]["ln_prob_first_batch"]
                common["max_abs_diff_vs_default"] = max(
                    abs(a - b)
                    for a, b in zip(first, last["ln_prob_first_batch"])
                )
            model = f"saved_model_{variant}"
            records.append(
                record(
                    "throughput",
                    "export_score_text_batch32",
                    model,
                    m["tokens_per_s"],
                    "tokens/s",
                    **_vs_default(variant, ref, "tokens_per_s"),
                    runs=[round(r["tokens_per_s"], 1) for r in results],
                    **common,
                )
            )
            records.append(
                record(
                    "latency",
                    "export_score_text_one_sentence",
                    model,
                    m["p50_ms"],
                    "ms (p50)",
                    **_vs_default(variant, ref, "p50_ms"),
                    digits=2,
                    p90_ms=round(m["p90_ms"], 2),
                    runs_p50=[round(r["p50_ms"], 2) for r in results],
                    runs_p90=[round(r["p90_ms"], 2) for r in results],
                    first_pass_singles_s=[
                        r["first_pass_singles_s"] for r in results
                    ],
                    **common,
                )
            )
    return records


def _vs_default(variant, ref, key):
    """A record's ``reference`` and ``reference_name``: for a variant
    other than the default, the default export's figure ``key`` (of its
    medians ``ref``)."""
    if variant == "default":
        return {"reference": None, "reference_name": None}
    return {
        "reference": ref[key] if ref else None,
        "reference_name": "default export",
    }


if __name__ == "__main__":
    main()
