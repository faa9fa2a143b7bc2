"""Training / evaluation throughput of Zaremba-style LSTM LMs, side by side.

Runs, in one script, the identical model (embedding -> 2 x LSTM -> softmax
over 10k words, batch 20, bptt 35 (small: 20), SGD + global clipping,
stateful) in:

* ``keras_rnnlm``: the package's fused LSTM (`keras_rnnlm.layers.LSTM`)
  through the package's builder and compile;
* ``keras_lstm``: the same builder with plain ``keras.layers.LSTM``;
* ``torch``: PyTorch 2.13 CPU ``nn.LSTM`` (the reference);
* ``keras_rnnlm_bf16``: the fused LSTM under ``mixed_bfloat16``.

Each measurement runs in a fresh subprocess (so peak RSS is per
implementation) on random token ids; repeats are interleaved across
implementations and the median is reported. Results are printed and
appended to ``bench/results/throughput.jsonl``.

    python bench/throughput.py --sizes small medium --repeats 3
"""

import argparse
import datetime
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

SIZES = {"small": (200, 20), "medium": (650, 35)}
VOCAB, BATCH = 10000, 20
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _records import add_eval_tokens_argument  # noqa: E402
from _records import eval_steps as count_eval_steps  # noqa: E402
from _records import median_rate  # noqa: E402


def _peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


_IMPORT_RSS = {}


def _note_import_rss():
    """Peak RSS right after the framework import (TensorFlow's libraries
    alone hold ~700 MB resident, torch's ~220 MB): the rest of the peak is
    what the model and its training cost."""
    _IMPORT_RSS["mb"] = _peak_rss_mb()


def measure_keras(impl, hidden, bptt, steps, eval_steps):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras
    import numpy as np

    from keras_rnnlm.config import ModelConfig
    from keras_rnnlm.config import TrainConfig
    from keras_rnnlm.layers.recurrence import set_forward_only
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.training import compile_model

    _note_import_rss()
    if impl.endswith("bf16"):
        keras.config.set_dtype_policy("mixed_bfloat16")
    cell = "keras_lstm" if impl == "keras_lstm" else "lstm"
    cfg = ModelConfig(
        embedding_dim=hidden, hidden_sizes=[hidden, hidden], cell=cell
    )
    model = build_language_model(cfg, VOCAB, BATCH, seed=0)
    compile_model(model, TrainConfig(learning_rate=1.0, clipnorm=5.0))
    rng = np.random.default_rng(0)
    x = rng.integers(0, VOCAB, (BATCH * steps, bptt)).astype("int32")
    y = rng.integers(0, VOCAB, (BATCH * steps, bptt)).astype("int32")
    warm = BATCH * 3
    model.fit(x[:warm], y[:warm], batch_size=BATCH, verbose=0, shuffle=False)
    t = time.perf_counter()
    model.fit(x, y, batch_size=BATCH, verbose=0, shuffle=False)
    train = x.size / (time.perf_counter() - t)
    x = rng.integers(0, VOCAB, (BATCH * eval_steps, bptt)).astype("int32")
    y = rng.integers(0, VOCAB, (BATCH * eval_steps, bptt)).astype("int32")
    # Evaluate as the package's Evaluator does: the fused loops in
    # forward-only mode (no per-step saves for a backward pass; a no-op for
    # keras.layers.LSTM).
    set_forward_only(model)
    model.evaluate(x[:warm], y[:warm], batch_size=BATCH, verbose=0)

    def one_pass():
        model.evaluate(x, y, batch_size=BATCH, verbose=0)

    return train, median_rate(one_pass, x.size)


def measure_torch(hidden, bptt, steps, eval_steps):
    import torch
    from torch import nn

    _note_import_rss()

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(VOCAB, hidden)
            self.lstm = nn.LSTM(hidden, hidden, 2)
            self.dec = nn.Linear(hidden, VOCAB)

        def forward(self, x, state):
            out, state = self.lstm(self.emb(x), state)
            return self.dec(out), state

    if os.environ.get("OMP_NUM_THREADS"):
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    torch.manual_seed(0)
    model = Model()
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    loss_fn = nn.CrossEntropyLoss()
    n = max(steps, eval_steps)
    x = torch.randint(0, VOCAB, (n, bptt, BATCH))
    y = torch.randint(0, VOCAB, (n, bptt, BATCH))

    def run(n, training):
        state = (torch.zeros(2, BATCH, hidden), torch.zeros(2, BATCH, hidden))
        model.train(training)
        for k in range(n):
            state = tuple(s.detach() for s in state)
            if training:
                opt.zero_grad()
                out, state = model(x[k], state)
                loss = loss_fn(out.view(-1, VOCAB), y[k].view(-1))
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), 5.0)
                opt.step()
            else:
                with torch.no_grad():
                    out, state = model(x[k], state)
                    loss_fn(out.view(-1, VOCAB), y[k].view(-1))

    run(3, True)
    t = time.perf_counter()
    run(steps, True)
    train = steps * bptt * BATCH / (time.perf_counter() - t)
    run(3, False)
    return train, median_rate(
        lambda: run(eval_steps, False), eval_steps * bptt * BATCH
    )


def child(impl, size, steps, eval_steps):
    hidden, bptt = SIZES[size]
    if impl == "torch":
        train, evaluate = measure_torch(hidden, bptt, steps, eval_steps)
    else:
        train, evaluate = measure_keras(impl, hidden, bptt, steps, eval_steps)
    print(
        json.dumps(
            {
                "train": train,
                "eval": evaluate,
                "rss_mb": _peak_rss_mb(),
                "import_rss_mb": _IMPORT_RSS.get("mb", 0.0),
            }
        )
    )


def run_child(impl, size, steps, eval_steps, threads=0):
    env = dict(os.environ)
    if threads:
        env.update(
            TF_NUM_INTRAOP_THREADS=str(threads),
            TF_NUM_INTEROP_THREADS=str(threads),
            OMP_NUM_THREADS=str(threads),
        )
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            impl,
            size,
            str(steps),
            str(eval_steps),
        ],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    if out.returncode != 0:
        raise RuntimeError(
            f"{impl}/{size} failed (exit code {out.returncode}):\n"
            f"{out.stderr[-3000:]}"
        )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--sizes", nargs="+", default=["small", "medium"])
    p.add_argument(
        "--impls",
        nargs="+",
        default=["torch", "keras_rnnlm", "keras_lstm", "keras_rnnlm_bf16"],
    )
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", type=int, default=40)
    add_eval_tokens_argument(p)
    p.add_argument(
        "--out", default=os.path.join(HERE, "results", "throughput.jsonl")
    )
    p.add_argument(
        "--threads",
        type=int,
        default=0,
        help="intra/inter-op threads of TensorFlow and torch alike (0: the "
        "frameworks' defaults). On this 2-vCPU machine TensorFlow's default "
        "(2 threads) is bimodal: each evaluate call runs either at full "
        "speed or at exactly one core's speed, for keras.layers.LSTM as "
        "for the package's layers; 1 gives stable comparisons",
    )
    p.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        impl, size, steps, eval_steps = args.child
        return child(impl, size, int(steps), int(eval_steps))

    command = "python bench/throughput.py " + " ".join(sys.argv[1:])
    device = f"CPU {platform.processor() or platform.machine()}, "
    device += f"{os.cpu_count()} cores"
    date = datetime.date.today().isoformat()
    records = []
    for size in args.sizes:
        steps = args.steps if size == "small" else max(10, args.steps // 3)
        eval_steps = count_eval_steps(args.eval_tokens, BATCH, SIZES[size][1])
        samples = {impl: [] for impl in args.impls}
        for _ in range(args.repeats):  # interleaved repeats
            for impl in args.impls:
                samples[impl].append(
                    run_child(impl, size, steps, eval_steps, args.threads)
                )
        med = {
            impl: {
                k: statistics.median(s[k] for s in runs)
                for k in ("train", "eval", "rss_mb", "import_rss_mb")
            }
            for impl, runs in samples.items()
        }
        ref = med.get("torch")
        for impl, m in med.items():
            for phase in ("train", "eval"):
                rec = {
                    "kind": "throughput",
                    "name": f"zaremba_{size}_{phase}",
                    "model": impl,
                    "value": round(m[phase], 1),
                    "unit": "tok/s",
                    "reference": round(ref[phase], 1) if ref else None,
                    "reference_name": "torch 2.13 CPU nn.LSTM, same run",
                    "ratio": round(m[phase] / ref[phase], 3) if ref else None,
                    "device": device,
                    "command": command,
                    "date": date,
                    "threads": args.threads or "default",
                    "eval_tokens": eval_steps * BATCH * SIZES[size][1],
                }
                records.append(rec)
            records.append(
                {
                    "kind": "memory",
                    "name": f"zaremba_{size}_peak_rss",
                    "model": impl,
                    "value": round(m["rss_mb"], 1),
                    "unit": "MB",
                    "reference": round(ref["rss_mb"], 1) if ref else None,
                    "reference_name": "torch 2.13 CPU, same run",
                    "ratio": None,
                    "import_rss_mb": round(m["import_rss_mb"], 1),
                    "model_rss_mb": round(m["rss_mb"] - m["import_rss_mb"], 1),
                    "reference_model_rss_mb": (
                        round(ref["rss_mb"] - ref["import_rss_mb"], 1)
                        if ref
                        else None
                    ),
                    "device": device,
                    "command": command,
                    "date": date,
                    "threads": args.threads or "default",
                    "eval_tokens": eval_steps * BATCH * SIZES[size][1],
                }
            )
            print(
                f"{size:6s} {impl:18s} train {m['train']:8.0f} tok/s  "
                f"eval {m['eval']:8.0f} tok/s  peak RSS {m['rss_mb']:6.0f} MB"
                + (
                    f"  ({m['train'] / ref['train']:.2f}x / "
                    f"{m['eval'] / ref['eval']:.2f}x torch)"
                    if ref
                    else ""
                )
            )
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "a") as f:
        for rec in records:
            f.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
