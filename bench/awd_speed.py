"""Training speed of the AWD-LSTM family presets (Keras, this machine).

    python bench/awd_speed.py --recipe recipes/awd_lstm_ptb.py --preset paper

Trains the preset's model through the package's compile + ``fit`` (every
regulariser on, fixed windows of ``bptt`` so one compiled shape is timed)
for ``--warmup`` + ``--steps`` batches of real PTB training data, and
reports tokens/s after the warm-up and the implied seconds per PTB epoch
(929k training tokens). Appends a JSON line to
``bench/results/awd_speed.jsonl``.
"""

import argparse
import json
import os
import platform
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
    row = {
        "bench": "awd_speed",
        "recipe": os.path.basename(args.recipe),
        "preset": args.preset,
        "params": int(model.count_params()),
        "batch_size": d.batch_size,
        "bptt": d.bptt,
        "median_step_s": float(np.median(t)),
        "train_tokens_per_s": tok_s,
        "est_s_per_ptb_epoch": 929589 / tok_s,
        "backend": keras.backend.backend(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "note": "2-core CPU shared with other jobs (nice 10)",
    }
    print(json.dumps(row))
    with open(args.out, "a") as f:
        f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
