"""Characters/s of the multiplicative cells, side by side.

The character-level model of ``recipes/mlstm_ptb.py`` (one-hot input over
50 symbols -> one recurrent layer at the paper's ~292K-parameter size ->
softmax; batch 32, windows of 100 characters, Adam, global clipping,
stateful) trained and evaluated on random symbols, in:

* ``fused``: the package's :class:`MultiplicativeRNN` (input side hoisted,
  compiled loop; hand-written backward pass for mRNN, mLSTM, mGRU, true
  mGRU, a backward loop recomputing each step's vector-Jacobian product
  for true mLSTM; evaluation forward-only);
* ``naive``: the same cell in Keras's per-step ``keras.layers.RNN`` loop
  (``fused=False``);
* ``lstm``: the package's fused LSTM with the same parameter count (240
  units; the per-step FLOPs of a recurrent layer are proportional to its
  parameter count, so equal parameters ~ equal FLOPs);
* ``torch``: the same cell and model in PyTorch 2.13 CPU (input side
  hoisted, a plain Python loop over time, eager autograd);
* ``torch_jit``: the same with the step traced by TorchScript
  (``torch.jit.trace``; one graph call per step). The PyTorch reference of
  each phase is the faster of ``torch`` and ``torch_jit`` where both ran.

Each measurement runs in a fresh subprocess, which times three training
and three evaluation passes and keeps each phase's median
(``_harness.median_rate``); repeats are interleaved and the median over
them is reported. Results are printed and appended to
``bench/results/multiplicative.jsonl`` (``--out``).

    python bench/multiplicative.py --cells mlstm mgru --repeats 3
    python bench/multiplicative.py --cells mrnn --steps 1 --repeats 1 \
        --impls fused torch --no-record   # a quick check
"""

import _harness as harness

VOCAB, BATCH, BPTT = 50, 32, 100


def _units(cell):
    from keras_rnnlm.models.params import solve_char_units

    return solve_char_units(cell, 292_000, VOCAB)


def model_config(impl, cell):
    """The Keras implementation ``impl``'s ModelConfig of ``cell``."""
    from keras_rnnlm.config import ModelConfig

    if impl == "lstm":
        name, kwargs = "lstm", {}
    else:
        name, kwargs = cell, {"fused": impl == "fused"}
    return ModelConfig(
        input_encoding="one_hot",
        hidden_sizes=[_units(name)],
        cell=name,
        cell_kwargs=kwargs,
        init_range=None,
    )


def measure_keras(impl, cell, steps):
    from keras_rnnlm.config import TrainConfig
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.training import compile_model

    cfg = model_config(impl, cell)
    model = build_language_model(cfg, VOCAB, BATCH, seed=0)
    compile_model(
        model, TrainConfig(optimizer="adam", learning_rate=1e-3, clipnorm=5.0)
    )
    rates = harness.keras_lm_rates(
        model,
        cfg,
        VOCAB,
        BATCH,
        BPTT,
        steps,
        steps,
        train_passes=harness.EVAL_PASSES,
    )
    return (*rates, model.count_params())


def _torch_cell(cell, units, d):
    """The cell's weights (the package's layouts) and its step function."""
    import torch

    from keras_rnnlm.layers.multiplicative import CELLS

    shapes = CELLS[cell](units)._weight_shapes(d, d)
    gen = torch.Generator().manual_seed(0)
    w = {
        n: torch.nn.Parameter(torch.rand(*s, generator=gen) * 0.2 - 0.1)
        for n, (s, _) in shapes.items()
    }
    H, M = units, d
    sig, tanh = torch.sigmoid, torch.tanh

    def lstm_update(z, c):
        i, f, u, o = z.split(H, dim=-1)
        c = sig(f) * c + sig(i) * tanh(u)
        return sig(o) * tanh(c), c

    def step(p, states):
        if cell == "mrnn":
            (h,) = states
            m = p[:, :M] * (h @ w["recurrent_kernel"] + w["recurrent_bias"])
            h = tanh(p[:, M:] + m @ w["intermediate_kernel"])
            return h, (h,)
        if cell == "mlstm":
            h, c = states
            m = p[:, :M] * (h @ w["recurrent_kernel"] + w["recurrent_bias"])
            h, c = lstm_update(p[:, M:] + m @ w["intermediate_kernel"], c)
            return h, (h, c)
        if cell == "tmlstm":
            h, c = states
            a = h @ w["recurrent_kernel"] + w["recurrent_bias"]
            m = (p[:, : 4 * M] * a).view(-1, 4, M).transpose(0, 1)
            z = torch.bmm(m, w["intermediate_kernel"]).transpose(0, 1)
            h, c = lstm_update(p[:, 4 * M :] + z.reshape(-1, 4 * H), c)
            return h, (h, c)
        if cell == "mgru":
            (h,) = states
            m = p[:, :M] * (h @ w["recurrent_kernel"] + w["recurrent_bias"])
            zr = sig(p[:, M : 2 * M + H] + m @ w["intermediate_kernel"])
            z, r = zr[:, :H], zr[:, H:]
            cand = p[:, 2 * M + H :] + (r * m) @ w["candidate_kernel"]
            h = (1 - z) * h + z * tanh(cand)
            return h, (h,)
        (h,) = states  # tmgru
        a = h @ w["recurrent_kernel"] + w["recurrent_bias"]
        m = (p[:, : 2 * M] * a).view(-1, 2, M).transpose(0, 1)
        zr = torch.bmm(m, w["intermediate_kernel"]).transpose(0, 1)
        px = p[:, 3 * M :]
        zr = sig(px[:, : 2 * H] + zr.reshape(-1, 2 * H))
        z, r = zr[:, :H], zr[:, H:]
        m_h = p[:, 2 * M : 3 * M] * (
            (r * h) @ w["reset_kernel"] + w["reset_bias"]
        )
        h = (1 - z) * h + z * tanh(px[:, 2 * H :] + m_h @ w["candidate_kernel"])
        return h, (h,)

    n_states = 2 if cell in ("mlstm", "tmlstm") else 1
    return w, step, n_states


def _traced(step, w, units, n_states):
    """``step`` compiled by TorchScript tracing (the weights a module's
    parameters): one graph call per time step instead of Python ops."""
    import torch

    class Step(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.ParameterDict(w)

        def forward(self, p, *states):
            h, states = step(p, states)
            return states

    p = torch.zeros(BATCH, w["kernel"].shape[1])
    states = tuple(torch.zeros(BATCH, units) for _ in range(n_states))
    module = torch.jit.trace(Step(), (p, *states), check_trace=False)

    def traced(p, states):
        states = module(p, *states)
        states = states if isinstance(states, tuple) else (states,)
        return states[0], states

    return traced


def measure_torch(cell, steps, jit=False):
    import torch
    from torch import nn

    harness.set_torch_threads(torch)
    torch.manual_seed(0)
    units = _units(cell)
    w, step, n_states = _torch_cell(cell, units, VOCAB)
    if jit:
        step = _traced(step, w, units, n_states)
    dec = nn.Linear(units, VOCAB)
    params = [*w.values(), *dec.parameters()]

    def forward(xk, states):
        onehot = nn.functional.one_hot(xk, VOCAB).float()
        proj = onehot @ w["kernel"] + w["bias"]  # (T, B, ...) hoisted
        outs = []
        for t in range(BPTT):
            h, states = step(proj[t], states)
            outs.append(h)
        return dec(torch.stack(outs)), states

    rates = harness.torch_rates(
        forward,
        lambda: tuple(torch.zeros(BATCH, units) for _ in range(n_states)),
        params,
        torch.optim.Adam(params, lr=1e-3),
        5.0,
        VOCAB,
        BATCH,
        BPTT,
        steps,
        steps,
        train_passes=harness.EVAL_PASSES,
    )
    return (*rates, sum(p.numel() for p in params))


def measure(impl, cell, steps):
    if impl in ("torch", "torch_jit"):
        result = measure_torch(cell, steps, jit=impl == "torch_jit")
    else:
        result = measure_keras(impl, cell, steps)
    return dict(zip(("train", "eval", "params"), result))


def main():
    impls = ["fused", "naive", "lstm", "torch", "torch_jit"]
    p = harness.paired_parser(__doc__, "multiplicative.jsonl", impls, repeats=3)
    cells = ["mlstm", "tmlstm", "mgru", "tmgru", "mrnn"]
    p.add_argument("--cells", nargs="+", default=cells)
    p.add_argument("--steps", type=int, default=10)
    args = harness.parse(p, measure)

    env = harness.thread_env(args.threads)
    fields = harness.record_fields(
        "multiplicative.py",
        threads=args.threads or None,
        keras_eval=harness.KERAS_EVAL,
    )
    records = []
    lstm_cache = None
    for cell in args.cells:
        impls = [i for i in args.impls if not (i == "lstm" and lstm_cache)]
        samples = harness.run_children(
            __file__, impls, args.repeats, env, cell=cell, steps=args.steps
        )
        med = harness.medians(samples, ("train", "eval", "params"))
        if "lstm" in med:
            lstm_cache = med["lstm"]
        elif lstm_cache:
            med["lstm"] = lstm_cache
        # The PyTorch reference of each phase: the faster of the plain loop
        # and the TorchScript-traced step, where both ran.
        torch_impls = [i for i in ("torch", "torch_jit") if i in med]
        best = {
            phase: max(torch_impls, key=lambda i: med[i][phase])
            for phase in ("train", "eval")
            if torch_impls
        }
        for impl, m in med.items():
            if impl == "lstm" and cell != args.cells[0]:
                continue
            for phase in ("train", "eval"):
                refs = {"lstm": med["lstm"][phase]} if "lstm" in med else {}
                if best:
                    refs["torch"] = med[best[phase]][phase]
                torch_ref = refs.get("torch")
                jit = " (TorchScript)" if best.get(phase) == "torch_jit" else ""
                records.append(
                    harness.record(
                        "throughput",
                        f"charlm_{cell}_paper_{phase}",
                        impl if impl != "lstm" else "lstm_240",
                        m[phase],
                        "char/s",
                        torch_ref,
                        "torch 2.13 CPU, same cell, same run" + jit,
                        params=int(m["params"]),
                        **harness.malloc_fields(
                            samples.get(impl, []),
                            samples.get(best[phase]) if best else None,
                        ),
                        ratio_to_fused_lstm=round(m[phase] / refs["lstm"], 3)
                        if "lstm" in refs
                        else None,
                    )
                )
            line = (
                f"{cell:7s} {impl:6s} {int(m['params']):7d} params  train "
                f"{m['train']:7.0f} char/s  eval {m['eval']:7.0f} char/s"
            )
            if best and not impl.startswith("torch"):
                ref = {ph: med[best[ph]][ph] for ph in ("train", "eval")}
                line += harness.vs(
                    m, ref, f"torch best: {best['train']} / {best['eval']}"
                )
            if "lstm" in med and impl != "lstm":
                line += harness.vs(m, med["lstm"], "lstm")
            print(line, flush=True)
    harness.write_records(args, records, fields)


if __name__ == "__main__":
    main()
