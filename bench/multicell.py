"""Tokens/s of the multi-cell LSTM language model, side by side.

The word-level model of ``recipes/multicell_ptb.py`` (vocabulary 10000,
embedding = hidden size, two recurrent layers, dropout, softmax; batch 20,
windows of 35 tokens, SGD with global-norm clipping, stateful), trained
and evaluated on random tokens, with its recurrent layers as:

* ``fused``: the package's :class:`MultiCellLSTM` (input projection
  hoisted, compiled loop, hand-written compiled backward loop);
* ``autodiff``: the same compiled forward loop, differentiated by
  :func:`keras_rnnlm.layers.recurrence.make_fused_scan` (``fused=
  "autodiff"``: per-step recomputed vector-Jacobian products);
* ``naive``: the same cell in Keras's per-step ``keras.layers.RNN`` loop
  (``fused=False``);
* ``lstm``: the package's fused LSTM of the same size (the plain LSTM the
  paper compares with);
* ``torch``: the same multi-cell cell in PyTorch 2.13 CPU (input
  projection hoisted, a Python loop over time, eager autograd).

Each measurement runs in a fresh subprocess; repeats are interleaved and
the median is reported. Results are printed and appended to
``bench/results/multicell.jsonl``.

    python bench/multicell.py --sizes small --cells 10 --strategy max
    python bench/multicell.py --scope layer --impls fused autodiff lstm naive
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

VOCAB, BATCH, BPTT = 10000, 20, 35
SIZES = {"small": (200, 0.4), "medium": (650, 0.5), "large": (1500, 0.65)}
FUSED = {"fused": True, "autodiff": "autodiff", "naive": False}
SCOPE = ["model"]  # or "layer" (set by --scope)
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

from _harness import add_eval_tokens_argument  # noqa: E402
from _harness import eval_steps as count_eval_steps  # noqa: E402
from _harness import median_rate  # noqa: E402


def measure_keras(impl, size, cells, strategy, steps, eval_steps):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy as np

    from keras_rnnlm.config import ModelConfig
    from keras_rnnlm.config import TrainConfig
    from keras_rnnlm.layers.recurrence import set_forward_only
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.training import compile_model

    units, dropout = SIZES[size]
    if SCOPE[0] == "layer":
        return measure_layer(impl, units, cells, strategy, steps)
    if impl == "lstm":
        name, kwargs = "lstm", {}
    else:
        name = "multicell_lstm"
        kwargs = {
            "num_cells": cells,
            "strategy": strategy,
            "fused": FUSED[impl],
        }
    cfg = ModelConfig(
        embedding_dim=units,
        hidden_sizes=[units, units],
        cell=name,
        cell_kwargs=kwargs,
        dropout=dropout,
        init_range=0.1,
    )
    model = build_language_model(cfg, VOCAB, BATCH, seed=0)
    compile_model(
        model, TrainConfig(optimizer="sgd", learning_rate=1.0, clipnorm=0.15)
    )
    rng = np.random.default_rng(0)
    x = rng.integers(0, VOCAB, (BATCH * steps, BPTT)).astype("int32")
    y = rng.integers(0, VOCAB, (BATCH * steps, BPTT)).astype("int32")
    warm = BATCH * 2
    model.fit(x[:warm], y[:warm], batch_size=BATCH, verbose=0, shuffle=False)
    t = time.perf_counter()
    model.fit(x, y, batch_size=BATCH, verbose=0, shuffle=False)
    train = x.size / (time.perf_counter() - t)
    x = rng.integers(0, VOCAB, (BATCH * eval_steps, BPTT)).astype("int32")
    y = rng.integers(0, VOCAB, (BATCH * eval_steps, BPTT)).astype("int32")
    # Evaluate as the package's Evaluator does (fused loops forward-only).
    set_forward_only(model)
    model.evaluate(x[:warm], y[:warm], batch_size=BATCH, verbose=0)
    evaluate = median_rate(
        lambda: model.evaluate(x, y, batch_size=BATCH, verbose=0), x.size
    )
    return train, evaluate, model.count_params()


def measure_layer(impl, units, cells, strategy, steps):
    """One recurrent layer alone (inputs of width ``units``, MSE to zero):
    the recurrence without the embedding and the 10000-way softmax."""
    import keras
    import numpy as np

    from keras_rnnlm.layers.lstm import LSTM
    from keras_rnnlm.layers.multicell_lstm import MultiCellLSTM
    from keras_rnnlm.layers.recurrence import set_forward_only

    if impl == "lstm":
        layer = LSTM(units, return_sequences=True, stateful=True)
    else:
        layer = MultiCellLSTM(
            units,
            num_cells=cells,
            strategy=strategy,
            fused=FUSED[impl],
            return_sequences=True,
            stateful=True,
        )
    model = keras.Sequential(
        [keras.Input(batch_shape=(BATCH, BPTT, units)), layer]
    )
    model.compile(optimizer=keras.optimizers.SGD(1.0), loss="mse")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(BATCH * steps, BPTT, units)).astype("float32")
    y = np.zeros((BATCH * steps, BPTT, units), "float32")
    warm = BATCH * 2
    model.fit(x[:warm], y[:warm], batch_size=BATCH, verbose=0, shuffle=False)
    t = time.perf_counter()
    model.fit(x, y, batch_size=BATCH, verbose=0, shuffle=False)
    train = BATCH * steps * BPTT / (time.perf_counter() - t)
    set_forward_only(model)
    model.predict(x[:warm], batch_size=BATCH, verbose=0)
    evaluate = median_rate(
        lambda: model.predict(x, batch_size=BATCH, verbose=0),
        BATCH * steps * BPTT,
    )
    return train, evaluate, model.count_params()


def measure_torch(size, cells, strategy, steps, eval_steps):
    import torch
    from torch import nn

    if os.environ.get("BENCH_TORCH_THREADS"):
        torch.set_num_threads(int(os.environ["BENCH_TORCH_THREADS"]))
    if strategy not in ("max", "mean"):
        raise ValueError("the torch reference implements max and mean")
    torch.manual_seed(0)
    H, p = SIZES[size]
    m = cells

    class Layer(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.kernel = nn.Parameter(torch.rand(d, 4 * H) * 0.2 - 0.1)
            self.rk = nn.Parameter(torch.rand(H, 4 * H) * 0.2 - 0.1)
            self.bias = nn.Parameter(torch.rand(4 * H) * 0.2 - 0.1)

        def forward(self, x, state):  # x (T, B, d)
            h, c = state  # (B, H), (B, m, H)
            proj = x @ self.kernel + self.bias  # hoisted
            outs = []
            for t in range(x.shape[0]):
                z = proj[t] + h @ self.rk
                i, f, a, o = z.split(H, dim=-1)
                i, f, o = torch.sigmoid(i), torch.sigmoid(f), torch.sigmoid(o)
                c = (i * torch.tanh(a)).unsqueeze(1) + f.unsqueeze(1) * c
                c_eff = c.amax(1) if strategy == "max" else c.mean(1)
                h = o * torch.tanh(c_eff)
                outs.append(h)
            return torch.stack(outs), (h, c)

    emb = nn.Embedding(VOCAB, H)
    layers = nn.ModuleList([Layer(H), Layer(H)])
    drop = nn.Dropout(p)
    dec = nn.Linear(H, VOCAB)
    params = [
        *emb.parameters(),
        *layers.parameters(),
        *dec.parameters(),
    ]
    opt = torch.optim.SGD(params, lr=1.0)
    loss_fn = nn.CrossEntropyLoss()
    n = max(steps, eval_steps)
    x = torch.randint(0, VOCAB, (n, BPTT, BATCH))
    y = torch.randint(0, VOCAB, (n, BPTT, BATCH))

    def forward(xk, states):
        out = drop(emb(xk))
        new = []
        for layer, s in zip(layers, states):
            out, s = layer(out, s)
            out = drop(out)
            new.append(s)
        return dec(out), new

    def run(n, training):
        for mod in (drop, layers):
            mod.train(training)
        states = [(torch.zeros(BATCH, H), torch.zeros(BATCH, m, H))] * 2
        for k in range(n):
            states = [(h.detach(), c.detach()) for h, c in states]
            if training:
                opt.zero_grad()
                out, states = forward(x[k], states)
                loss = loss_fn(out.view(-1, VOCAB), y[k].view(-1))
                loss.backward()
                nn.utils.clip_grad_norm_(params, 0.15)
                opt.step()
            else:
                with torch.no_grad():
                    out, states = forward(x[k], states)
                    loss_fn(out.view(-1, VOCAB), y[k].view(-1))

    run(2, True)
    t = time.perf_counter()
    run(steps, True)
    train = steps * BPTT * BATCH / (time.perf_counter() - t)
    run(2, False)
    evaluate = median_rate(
        lambda: run(eval_steps, False), eval_steps * BPTT * BATCH
    )
    return train, evaluate, sum(q.numel() for q in params)


def child(impl, size, cells, strategy, steps, eval_steps):
    if impl == "torch":
        result = measure_torch(size, cells, strategy, steps, eval_steps)
    else:
        result = measure_keras(impl, size, cells, strategy, steps, eval_steps)
    train, evaluate, params = result
    print(json.dumps({"train": train, "eval": evaluate, "params": params}))


def run_child(impl, size, cells, strategy, steps, eval_steps):
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            impl,
            size,
            str(cells),
            strategy,
            str(steps),
            str(eval_steps),
            "--scope",
            SCOPE[0],
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{impl}/{size} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    p.add_argument("--sizes", nargs="+", default=["small", "medium"])
    p.add_argument("--cells", type=int, default=10)
    p.add_argument("--strategy", default="max")
    p.add_argument(
        "--impls", nargs="+", default=["fused", "naive", "lstm", "torch"]
    )
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--steps", type=int, default=20)
    add_eval_tokens_argument(p)  # model scope only
    p.add_argument(
        "--out", default=os.path.join(HERE, "results", "multicell.jsonl")
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="intra-op threads of TensorFlow and PyTorch (default: their "
        "defaults); 1 gives comparable numbers on a busy machine",
    )
    p.add_argument(
        "--scope",
        choices=("model", "layer"),
        default="model",
        help="the whole language model, or one recurrent layer alone",
    )
    p.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    args = p.parse_args()
    SCOPE[0] = args.scope
    if args.threads:
        os.environ["TF_NUM_INTRAOP_THREADS"] = str(args.threads)
        os.environ["TF_NUM_INTEROP_THREADS"] = "1"
        os.environ["BENCH_TORCH_THREADS"] = str(args.threads)
    if args.child:
        impl, size, cells, strategy, steps, eval_steps = args.child
        return child(
            impl, size, int(cells), strategy, int(steps), int(eval_steps)
        )

    command = "python bench/multicell.py " + " ".join(sys.argv[1:])
    device = f"CPU {platform.processor() or platform.machine()}, "
    device += f"{os.cpu_count()} cores"
    date = datetime.date.today().isoformat()
    load = os.getloadavg()[0]
    records = []
    for size in args.sizes:
        layer_only = args.scope == "layer"
        impls = [i for i in args.impls if not (i == "torch" and layer_only)]
        samples = {impl: [] for impl in impls}
        eval_steps = (
            args.steps
            if layer_only
            else count_eval_steps(args.eval_tokens, BATCH, BPTT)
        )
        for _ in range(args.repeats):  # interleaved repeats
            for impl in impls:
                samples[impl].append(
                    run_child(
                        impl,
                        size,
                        args.cells,
                        args.strategy,
                        args.steps,
                        eval_steps,
                    )
                )
        med = {
            impl: {
                k: statistics.median(s[k] for s in runs)
                for k in ("train", "eval", "params")
            }
            for impl, runs in samples.items()
        }
        for impl, m in med.items():
            for phase in ("train", "eval"):
                rec = {
                    "kind": "throughput",
                    "name": f"multicell_{args.scope}_{size}_"
                    f"m{args.cells}_{args.strategy}_{phase}",
                    "model": impl,
                    "value": round(m[phase], 1),
                    "unit": "tok/s",
                    "params": int(m["params"]),
                    "reference": None,
                    "reference_name": "torch 2.13 CPU, same cell, same run",
                    "ratio": None,
                    "device": device,
                    "load_average": round(load, 2),
                    "threads": args.threads,
                    "eval_tokens": eval_steps * BATCH * BPTT,
                    "command": command,
                    "date": date,
                }
                for ref in ("torch", "lstm", "naive"):
                    if ref in med:
                        r = m[phase] / med[ref][phase]
                        if ref == "torch":
                            rec["reference"] = round(med[ref][phase], 1)
                            rec["ratio"] = round(r, 3)
                        else:
                            rec[f"ratio_to_{ref}"] = round(r, 3)
                records.append(rec)
            line = (
                f"{size:6s} {impl:6s} {int(m['params']):9d} params  train "
                f"{m['train']:7.0f} tok/s  eval {m['eval']:7.0f} tok/s"
            )
            for ref in ("torch", "lstm", "naive"):
                if ref in med and ref != impl:
                    line += (
                        f"  ({m['train'] / med[ref]['train']:.2f}x / "
                        f"{m['eval'] / med[ref]['eval']:.2f}x {ref})"
                    )
            print(line, flush=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "a") as f:
        for rec in records:
            f.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
