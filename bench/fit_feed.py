"""How ``model.fit`` is fed, and the random half-speed training passes.

Trains the Zaremba small LSTM (2 x 200, batch 20 x 20, SGD with clipping;
the package's builder and compile) on one LMSequence of ``--windows``
windows, fed to ``fit`` in turn as

* ``sequence``: the ``LMSequence`` itself (a ``keras.utils.PyDataset``:
  Keras's own ``tf.data`` pipeline, autotuned, with a prefetch buffer;
  what the trainer did before ``keras_rnnlm.data.fit_data``);
* ``arrays``: the batches as numpy arrays (``fit(x, y, sample_weight)``,
  what the throughput benches did);
* ``fit_data``: :func:`keras_rnnlm.data.fit_data.fit_data` (what the
  trainer does now: no autotuning, no prefetch).

Each fresh process (``--processes``, at ``--threads``) runs every feed
``--passes`` times, interleaved, and reports each pass's tok/s. A pass is
counted slow below ``--slow`` x the fastest pass of the process (the slow
mode runs at about half speed). Records (kind ``throughput``; the value is
the median pass, the reference the ``sequence`` feed's; ``slow_passes`` /
``passes`` and every pass's rate) go to ``bench/results/fit_feed.jsonl``.

    python bench/fit_feed.py --processes 3 --passes 6 --threads 2
"""

import statistics
import time

import _harness as harness

FEEDS = ("sequence", "arrays", "fit_data")
HIDDEN, BPTT, VOCAB, BATCH = 200, 20, 10000, 20


def measure(impl, windows, passes):
    del impl
    import numpy as np
    from throughput import model_config

    from keras_rnnlm.config import TrainConfig
    from keras_rnnlm.data.fit_data import fit_data
    from keras_rnnlm.data.streams import LMSequence
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.training import compile_model

    cfg = model_config("keras_rnnlm", HIDDEN)
    model = build_language_model(cfg, VOCAB, BATCH, seed=0)
    compile_model(model, TrainConfig(learning_rate=1.0, clipnorm=5.0))
    rng = np.random.default_rng(0)
    ids = rng.integers(0, VOCAB, BATCH * (windows * BPTT + 1), "int32")
    seq = LMSequence(ids, BATCH, BPTT)
    x, y, w = (
        np.concatenate(a) for a in zip(*(seq[i] for i in range(windows)))
    )

    feeds = {
        "sequence": lambda: model.fit(seq, verbose=0, shuffle=False),
        "arrays": lambda: model.fit(
            x, y, sample_weight=w, batch_size=BATCH, verbose=0, shuffle=False
        ),
        "fit_data": lambda: model.fit(fit_data(seq), verbose=0, shuffle=False),
    }
    for fit in feeds.values():
        fit()  # tracing, compilation
    rates = {f: [] for f in FEEDS}
    for _ in range(passes):
        for name, fit in feeds.items():
            t = time.perf_counter()
            fit()
            rates[name].append(
                windows * BATCH * BPTT / (time.perf_counter() - t)
            )
    return {"rates": rates}


def main():
    parser = harness.paired_parser(
        __doc__, "fit_feed.jsonl", ("keras",), repeats=1, threads=2
    )
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--passes", type=int, default=6)
    parser.add_argument("--windows", type=int, default=40)
    parser.add_argument("--slow", type=float, default=0.7)
    args = harness.parse(parser, measure)
    runs = []
    for p in range(args.processes):
        r = harness.run_child(
            __file__,
            {"impl": "keras", "windows": args.windows, "passes": args.passes},
            harness.thread_env(args.threads),
        )
        print(p, {k: [round(v) for v in vs] for k, vs in r["rates"].items()})
        runs.append(r)
    summary = {}
    for feed in FEEDS:
        every, slow = [], 0
        for r in runs:
            fastest = max(max(vs) for vs in r["rates"].values())
            rates = r["rates"][feed]
            every += rates
            slow += sum(v < args.slow * fastest for v in rates)
        summary[feed] = (statistics.median(every), slow, every)
        print(
            f"{feed:9s} median {summary[feed][0]:8.0f} tok/s, "
            f"slow passes {slow} of {len(every)}"
        )
    ref = summary["sequence"][0]
    records = [
        harness.record(
            "throughput",
            f"fit_feed_zaremba_small_{feed}",
            "keras",
            med,
            "tok/s",
            ref,
            "the LMSequence handed to fit, same processes",
            threads=args.threads,
            slow_passes=slow,
            passes=len(every),
            pass_rates=[round(v) for v in every],
            **harness.malloc_fields(runs),
        )
        for feed, (med, slow, every) in summary.items()
    ]
    harness.write_records(args, records, harness.record_fields("fit_feed.py"))


if __name__ == "__main__":
    main()
