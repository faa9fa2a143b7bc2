"""Training speed of the AWD-LSTM family presets (Keras, this machine).

    python bench/awd_speed.py --recipe recipes/awd_lstm_ptb.py --preset paper

Trains the preset's model through the package's compile + ``fit`` (every
regulariser on, fixed windows of ``bptt`` so one compiled shape is timed)
for ``--warmup`` + ``--steps`` batches of real PTB training data, and
reports tokens/s after the warm-up and the implied seconds per PTB epoch
(929k training tokens). Appends one record in the schema of
``bench/make_results.py`` (kind ``throughput``, unit tok/s, with the
1-minute load average) to ``bench/results/awd_speed.jsonl``. For a
side-by-side comparison with PyTorch see ``bench/awd_throughput.py``.
"""

import argparse
import datetime
import json
import os
import platform
import sys
import time

import keras
import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--recipe", required=True)
    ap.add_argument("--preset", default="paper")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--out", default="bench/results/awd_speed.jsonl")
    args = ap.parse_args()

    from keras_rnnlm.data.streams import LMSequence
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.recipe import config_from_preset
    from keras_rnnlm.recipe import load_recipe
    from keras_rnnlm.training.trainer import compile_model
    from keras_rnnlm.training.trainer import load_run_corpus

    config = config_from_preset(load_recipe(args.recipe).PRESETS, args.preset)
    d = config.data
    corpus = load_run_corpus(config)
    model = build_language_model(
        config.model, len(corpus.vocab), d.batch_size, seed=1
    )
    compile_model(model, config.train)
    n = (args.warmup + args.steps) * d.batch_size * d.bptt + d.batch_size
    stream = LMSequence(corpus.train[:n], d.batch_size, d.bptt)

    class Timer(keras.callbacks.Callback):
        times = []

        def on_train_batch_end(self, batch, logs=None):
            self.times.append(time.perf_counter())

    timer = Timer()
    model.fit(stream, epochs=1, shuffle=False, verbose=0, callbacks=[timer])
    t = np.diff(timer.times[args.warmup - 1 :])
    tok_s = d.batch_size * d.bptt / float(np.median(t))
    stem = os.path.splitext(os.path.basename(args.recipe))[0]
    params = int(sum(np.prod(w.shape) for w in model.trainable_weights))
    row = {
        "kind": "throughput",
        "name": f"{stem}_{args.preset}_train_awd_speed",
        "model": "keras",
        "value": round(tok_s, 1),
        "unit": "tok/s",
        "reference": None,
        "reference_name": None,
        "ratio": None,
        "device": f"CPU {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores",
        "command": "python bench/awd_speed.py " + " ".join(sys.argv[1:]),
        "date": datetime.date.today().isoformat(),
        "params": params,
        "batch_size": d.batch_size,
        "bptt": d.bptt,
        "steps": args.steps,
        "warmup": args.warmup,
        "median_step_s": round(float(np.median(t)), 3),
        "est_s_per_ptb_epoch": round(929589 / tok_s),
        "backend": keras.backend.backend(),
        "load_average": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(row))
    with open(args.out, "a") as f:
        f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
