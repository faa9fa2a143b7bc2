"""Time to replay an export's TF Serving warm-up file.

Exports an untrained model of the given size (``--units`` per layer, 2
layers, ``--vocab`` words; the default is Zaremba-medium-sized, 650 units
and PTB's 10k words) with ``keras_rnnlm.export.export_saved_model``, loads
it with ``tf.saved_model.load`` and runs every request of its
``assets.extra/tf_serving_warmup_requests`` in order, as TF Serving does
at load. One record (kind ``latency``, seconds; the seconds per signature
with it) goes to ``bench/results/warmup_replay.jsonl``.

    python -m bench.warmup_replay --threads 1
    python -m bench.warmup_replay --threads 1 --xla
"""

import collections
import json
import os
import shutil
import tempfile
import time

from bench.harness.options import add_output_arguments
from bench.harness.options import add_threads_argument
from bench.harness.options import bench_parser
from bench.harness.processes import set_threads
from bench.harness.records import record
from bench.harness.records import record_fields
from bench.harness.records import write_records

MODULE = "bench.warmup_replay"


def parser():
    p = bench_parser(MODULE, __doc__)
    p.add_argument("--units", type=int, default=650)
    p.add_argument("--vocab", type=int, default=10000)
    p.add_argument("--xla", action="store_true")
    p.add_argument("--warmup-max-length", type=int, default=None)
    add_threads_argument(p)
    add_output_arguments(p, "warmup_replay.jsonl")
    return p


def export(args, out):
    """Exports an untrained model to ``out``; returns the seconds taken."""
    from keras_rnnlm.config import ModelConfig
    from keras_rnnlm.data import Vocabulary
    from keras_rnnlm.export import export_saved_model
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.scoring import Scorer

    words = [f"w{i}" for i in range(args.vocab - 2)]
    vocab = Vocabulary(["<eos>", "<unk>", *words])
    cfg = ModelConfig(embedding_dim=args.units, hidden_sizes=[args.units] * 2)
    model = build_language_model(cfg, len(vocab), None, stateful=False)
    t = time.perf_counter()
    export_saved_model(
        Scorer(model, vocab),
        out,
        xla=args.xla,
        warmup_max_length=args.warmup_max_length,
    )
    return time.perf_counter() - t


def replay(out):
    """Replays the warm-up file of the export at ``out``: ``(requests,
    total seconds, seconds per signature)``."""
    import tensorflow as tf

    from keras_rnnlm.export.warmup import read_warmup_file
    from keras_rnnlm.export.warmup import warmup_path

    loaded = tf.saved_model.load(out)
    requests = read_warmup_file(warmup_path(out))
    seconds = collections.Counter()
    t0 = time.perf_counter()
    for r in requests:
        t = time.perf_counter()
        inputs = {k: tf.constant(v) for k, v in r.inputs.items()}
        loaded.signatures[r.signature](**inputs)
        seconds[r.signature] += time.perf_counter() - t
    return len(requests), time.perf_counter() - t0, seconds


def main(argv=None):
    args = parser().parse_args(argv)
    set_threads(args.threads)
    tmp = tempfile.mkdtemp(prefix="warmup_replay_")
    try:
        out = os.path.join(tmp, "lm", "1")
        export_s = export(args, out)
        n, total, seconds = replay(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rec = record(
        "latency",
        "export_warmup_replay",
        "saved_model_xla" if args.xla else "saved_model_default",
        total,
        "s",
        units=args.units,
        vocab=args.vocab,
        requests=n,
        export_s=round(export_s, 1),
        seconds={k: round(v, 1) for k, v in seconds.items()},
        warmup_max_length=args.warmup_max_length,
    )
    print(json.dumps(rec))
    write_records(
        args, [rec], record_fields(MODULE, argv, threads=args.threads)
    )


if __name__ == "__main__":
    main()
