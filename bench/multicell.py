"""Tokens/s of the multi-cell LSTM language model, side by side.

The word-level model of ``recipes/multicell_ptb.py`` (vocabulary 10000,
embedding = hidden size, two recurrent layers, dropout, softmax; batch 20,
windows of 35 tokens, SGD with global-norm clipping, stateful), trained
and evaluated on random tokens, with its recurrent layers as:

* ``fused``: the package's :class:`MultiCellLSTM` (input projection
  hoisted, compiled loop, hand-written compiled backward loop);
* ``autodiff``: the same compiled forward loop, differentiated by
  :func:`keras_rnnlm.loops.recurrence.make_fused_scan` (``fused=
  "autodiff"``: per-step recomputed vector-Jacobian products);
* ``naive``: the same cell in Keras's per-step ``keras.layers.RNN`` loop
  (``fused=False``);
* ``lstm``: the package's fused LSTM of the same size (the plain LSTM the
  paper compares with);
* ``torch``: the same multi-cell cell in PyTorch 2.13 CPU (input
  projection hoisted, a Python loop over time, eager autograd).

Each measurement runs in a fresh subprocess; repeats are interleaved and
the median is reported. Results are printed and appended to
``bench/results/multicell.jsonl`` (``--out``).

    python bench/multicell.py --sizes small --cells 10 --strategy max
    python bench/multicell.py --scope layer --impls fused autodiff lstm naive
    python bench/multicell.py --sizes small --steps 2 --repeats 1 \
        --eval-tokens 1400 --impls fused torch --no-record   # a quick check
"""

import _harness as harness

VOCAB, BATCH, BPTT = 10000, 20, 35
SIZES = {"small": (200, 0.4), "medium": (650, 0.5), "large": (1500, 0.65)}
FUSED = {"fused": True, "autodiff": "autodiff", "naive": False}


def model_config(impl, size, cells, strategy):
    """The Keras implementation ``impl``'s ModelConfig."""
    from keras_rnnlm.config import ModelConfig

    units, dropout = SIZES[size]
    if impl == "lstm":
        name, kwargs = "lstm", {}
    else:
        name = "multicell_lstm"
        kwargs = {
            "num_cells": cells,
            "strategy": strategy,
            "fused": FUSED[impl],
        }
    return ModelConfig(
        embedding_dim=units,
        hidden_sizes=[units, units],
        cell=name,
        cell_kwargs=kwargs,
        dropout=dropout,
        init_range=0.1,
    )


def measure_keras(impl, size, cells, strategy, steps, eval_steps):
    from keras_rnnlm.config import TrainConfig
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.training import compile_model

    cfg = model_config(impl, size, cells, strategy)
    model = build_language_model(cfg, VOCAB, BATCH, seed=0)
    compile_model(
        model, TrainConfig(optimizer="sgd", learning_rate=1.0, clipnorm=0.15)
    )
    rates = harness.keras_lm_rates(
        model, cfg, VOCAB, BATCH, BPTT, steps, eval_steps
    )
    return (*rates, model.count_params())


def measure_layer(impl, units, cells, strategy, steps):
    """One recurrent layer alone (inputs of width ``units``, MSE to zero):
    the recurrence without the embedding and the 10000-way softmax."""
    import keras
    import numpy as np

    from keras_rnnlm.layers.lstm import LSTM
    from keras_rnnlm.layers.multicell_lstm import MultiCellLSTM

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
    rates = harness.keras_rates(model, (x, y), (x,), BATCH)
    return (*rates, model.count_params())


def measure_torch(size, cells, strategy, steps, eval_steps):
    import torch
    from torch import nn

    harness.set_torch_threads(torch)
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

    def forward(xk, states):
        out = drop(emb(xk))
        new = []
        for layer, s in zip(layers, states):
            out, s = layer(out, s)
            out = drop(out)
            new.append(s)
        return dec(out), new

    rates = harness.torch_rates(
        forward,
        lambda: [(torch.zeros(BATCH, H), torch.zeros(BATCH, m, H))] * 2,
        params,
        torch.optim.SGD(params, lr=1.0),
        0.15,
        VOCAB,
        BATCH,
        BPTT,
        steps,
        eval_steps,
        modules=[drop, layers],
    )
    return (*rates, sum(q.numel() for q in params))


def measure(impl, size, cells, strategy, steps, eval_steps, scope):
    if impl == "torch":
        result = measure_torch(size, cells, strategy, steps, eval_steps)
    elif scope == "layer":
        result = measure_layer(impl, SIZES[size][0], cells, strategy, steps)
    else:
        result = measure_keras(impl, size, cells, strategy, steps, eval_steps)
    return dict(zip(("train", "eval", "params"), result))


def main():
    impls = ["fused", "naive", "lstm", "torch"]
    p = harness.paired_parser(__doc__, "multicell.jsonl", impls, repeats=2)
    p.add_argument("--sizes", nargs="+", default=["small", "medium"])
    p.add_argument("--cells", type=int, default=10)
    p.add_argument("--strategy", default="max")
    p.add_argument("--steps", type=int, default=20)
    harness.add_eval_tokens_argument(p)  # model scope only
    p.add_argument(
        "--scope",
        choices=("model", "layer"),
        default="model",
        help="the whole language model, or one recurrent layer alone",
    )
    args = harness.parse(p, measure)

    fields = harness.record_fields(
        "multicell.py",
        threads=args.threads or None,
        keras_eval=harness.KERAS_EVAL,
    )
    layer_only = args.scope == "layer"
    impls = [i for i in args.impls if not (i == "torch" and layer_only)]
    eval_steps = (
        args.steps
        if layer_only
        else harness.eval_steps(args.eval_tokens, BATCH, BPTT)
    )
    records = []
    for size in args.sizes:
        samples = harness.run_children(
            __file__,
            impls,
            args.repeats,
            harness.thread_env(args.threads),
            size=size,
            cells=args.cells,
            strategy=args.strategy,
            steps=args.steps,
            eval_steps=eval_steps,
            scope=args.scope,
        )
        med = harness.medians(samples, ("train", "eval", "params"))
        for impl, m in med.items():
            for phase in ("train", "eval"):
                ref = med.get("torch")
                rec = harness.record(
                    "throughput",
                    f"multicell_{args.scope}_{size}_"
                    f"m{args.cells}_{args.strategy}_{phase}",
                    impl,
                    m[phase],
                    "tok/s",
                    ref and ref[phase],
                    "torch 2.13 CPU, same cell, same run",
                    params=int(m["params"]),
                    eval_tokens=eval_steps * BATCH * BPTT,
                    **harness.malloc_fields(
                        samples[impl], samples.get("torch") if ref else None
                    ),
                )
                for other in ("lstm", "naive"):
                    if other in med:
                        r = m[phase] / med[other][phase]
                        rec[f"ratio_to_{other}"] = round(r, 3)
                records.append(rec)
            line = (
                f"{size:6s} {impl:6s} {int(m['params']):9d} params  train "
                f"{m['train']:7.0f} tok/s  eval {m['eval']:7.0f} tok/s"
            )
            for other in ("torch", "lstm", "naive"):
                if other in med and other != impl:
                    line += harness.vs(m, med[other], other)
            print(line, flush=True)
    harness.write_records(args, records, fields)


if __name__ == "__main__":
    main()
