"""Training speed of a recipe preset on the trainer's path (Keras alone).

    python -m bench.train_speed --recipe recipes/awd_lstm_ptb.py --preset paper
    python -m bench.train_speed --recipe recipes/zaremba_ptb.py \\
        --preset small --smoke          # one timed step, no record

Builds the preset's model with the package's builder, compiles it with the
trainer's ``compile_model`` and trains it through ``model.fit`` fed as the
trainer feeds it (``keras_rnnlm.data.fit_data`` of an ``LMSequence``; every
regulariser on, fixed windows of ``bptt``, so one compiled shape is timed)
for ``--warmup`` + ``--steps`` batches of the recipe's real training data.
Reports tokens/s after the warm-up (median step time) and the implied
seconds per PTB epoch (929k training tokens). Appends one record (kind
``throughput``, unit tok/s) to ``bench/results/train_speed.jsonl``
(``--out``). Side by side with PyTorch: :mod:`bench.awd_throughput` (the
AWD family) and :mod:`bench.throughput` (Zaremba).

What it leaves out: the trainer's own loop (variable BPTT and each new
window length's compilation, callbacks, checkpoints, validation). It
stays for a preset's steady step alone, Keras only; the trainer itself,
beside PyTorch: :mod:`bench.upstream_epochs` and
:mod:`bench.family_trainer`.
"""

import json
import os

from bench.harness.options import PTB_TRAIN_TOKENS
from bench.harness.options import add_output_arguments
from bench.harness.options import add_overrides_argument
from bench.harness.options import add_threads_argument
from bench.harness.options import bench_parser
from bench.harness.processes import set_threads
from bench.harness.records import record
from bench.harness.records import record_fields
from bench.harness.records import write_records
from bench.harness.timing import fit_batch_times

MODULE = "bench.train_speed"


def parser():
    p = bench_parser(MODULE, __doc__)
    p.add_argument("--recipe", required=True)
    p.add_argument("--preset", default="paper")
    p.add_argument("--steps", type=int, default=5, help="timed steps")
    p.add_argument(
        "--warmup", type=int, default=2, help="untimed steps first (>= 1)"
    )
    p.add_argument(
        "--smoke",
        action="store_true",
        help="a check that the bench runs: one warm-up and one timed step, "
        "no record",
    )
    add_overrides_argument(
        p, "config overrides of the preset (e.g. train.jit_compile=false)"
    )
    add_threads_argument(p, default=0)
    add_output_arguments(p, "train_speed.jsonl")
    return p


def step_seconds(config, warmup, steps):
    """The model of ``config``, trained for ``warmup`` + ``steps`` batches;
    ``(model, median seconds of a timed step)``."""
    import numpy as np

    from keras_rnnlm.data.streams import LMSequence
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.runs import load_run_corpus
    from keras_rnnlm.training import compile_model

    d = config.data
    corpus = load_run_corpus(config)
    model = build_language_model(
        config.model, len(corpus.vocab), d.batch_size, seed=1
    )
    compile_model(model, config.train)
    n = (warmup + steps) * d.batch_size * d.bptt + d.batch_size
    stream = LMSequence(corpus.train[:n], d.batch_size, d.bptt)
    times = fit_batch_times(model, stream)
    return model, float(np.median(np.diff(times[warmup - 1 :])))


def main(argv=None):
    p = parser()
    args = p.parse_args(argv)
    if args.smoke:
        args.steps, args.warmup, args.no_record = 1, 1, True
    if args.warmup < 1:
        p.error("--warmup must be >= 1")
    set_threads(args.threads)
    import keras
    import numpy as np

    from keras_rnnlm.recipe import config_from_preset
    from keras_rnnlm.recipe import load_recipe

    config = config_from_preset(
        load_recipe(args.recipe).PRESETS, args.preset, args.overrides
    )
    model, step_s = step_seconds(config, args.warmup, args.steps)
    d = config.data
    tok_s = d.batch_size * d.bptt / step_s
    stem = os.path.splitext(os.path.basename(args.recipe))[0]
    rec = record(
        "throughput",
        f"{stem}_{args.preset}_train",
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
    fields = record_fields(MODULE, argv, threads=args.threads or None)
    write_records(args, [rec], fields)


if __name__ == "__main__":
    main()
