"""Training speed of the AWD-LSTM family presets (Keras alone).

    python -m bench.awd_speed --recipe recipes/awd_lstm_ptb.py --preset paper

Trains the preset's model through the package's compile + ``fit`` (every
regulariser on, fixed windows of ``bptt`` so one compiled shape is timed)
for ``--warmup`` + ``--steps`` batches of real PTB training data, and
reports tokens/s after the warm-up (median step time) and the implied
seconds per PTB epoch (929k training tokens). Appends one record in the
schema of ``bench/make_results.py`` (kind ``throughput``, unit tok/s) to
``bench/results/awd_speed.jsonl`` (``--out``). For a side-by-side
comparison with PyTorch see ``bench/awd_throughput.py``.
"""

import argparse
import json
import os

import keras
import numpy as np

from bench.harness.options import PTB_TRAIN_TOKENS
from bench.harness.options import add_output_arguments
from bench.harness.options import add_threads_argument
from bench.harness.processes import set_threads
from bench.harness.records import record
from bench.harness.records import record_fields
from bench.harness.records import write_records
from bench.harness.timing import fit_batch_times


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--recipe", required=True)
    ap.add_argument("--preset", default="paper")
    ap.add_argument("--steps", type=int, default=5, help="timed steps")
    ap.add_argument(
        "--warmup", type=int, default=2, help="untimed steps first (>= 1)"
    )
    ap.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config overrides of the preset (e.g. train.jit_compile=false)",
    )
    add_threads_argument(ap, default=0)
    add_output_arguments(ap, "awd_speed.jsonl")
    args = ap.parse_args(argv)
    if args.warmup < 1:
        ap.error("--warmup must be >= 1")
    set_threads(args.threads)

    from keras_rnnlm.data.streams import LMSequence
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.recipe import config_from_preset
    from keras_rnnlm.recipe import load_recipe
    from keras_rnnlm.runs import load_run_corpus
    from keras_rnnlm.training.trainer import compile_model

    config = config_from_preset(
        load_recipe(args.recipe).PRESETS, args.preset, args.overrides
    )
    d = config.data
    corpus = load_run_corpus(config)
    model = build_language_model(
        config.model, len(corpus.vocab), d.batch_size, seed=1
    )
    compile_model(model, config.train)
    n = (args.warmup + args.steps) * d.batch_size * d.bptt + d.batch_size
    stream = LMSequence(corpus.train[:n], d.batch_size, d.bptt)

    times = fit_batch_times(model, stream)
    step_s = float(np.median(np.diff(times[args.warmup - 1 :])))
    tok_s = d.batch_size * d.bptt / step_s
    stem = os.path.splitext(os.path.basename(args.recipe))[0]
    rec = record(
        "throughput",
        f"{stem}_{args.preset}_train_awd_speed",
        "keras",
        tok_s,
        "tok/s",
        params=int(sum(np.prod(w.shape) for w in model.trainable_weights)),
        batch_size=d.batch_size,
        bptt=d.bptt,
        steps=args.steps,
        warmup=args.warmup,
        median_step_s=round(step_s, 3),
        est_s_per_ptb_epoch=round(PTB_TRAIN_TOKENS / tok_s),
        backend=keras.backend.backend(),
        jit_compile=bool(model.jit_compile),
        overrides=args.overrides,
        tf_intra_op_env=os.environ.get("TF_NUM_INTRAOP_THREADS"),
        tf_inter_op_env=os.environ.get("TF_NUM_INTEROP_THREADS"),
    )
    print(json.dumps(rec))
    fields = record_fields("bench.awd_speed", argv, threads=args.threads or None)
    write_records(args, [rec], fields)


if __name__ == "__main__":
    main()
