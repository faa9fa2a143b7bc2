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
* ``torch``: the same cell and model in PyTorch CPU
  (:mod:`bench.reference.multiplicative`: input side hoisted, a plain
  Python loop over time, eager autograd);
* ``torch_jit``: the same with the step traced by TorchScript
  (``torch.jit.trace``; one graph call per step). The PyTorch reference of
  each phase is the faster of ``torch`` and ``torch_jit`` where both ran.

Each measurement runs in a fresh subprocess, which times three training
and three evaluation passes and keeps each phase's median
(:func:`bench.harness.timing.median_rate`); repeats are interleaved and
the median over them is reported. Results are printed and appended to
``bench/results/multiplicative.jsonl`` (``--out``).

What it leaves out: the trainer's path (PTB-char's data pipeline,
callbacks, checkpoints, validation): random symbols through
``model.fit``. It stays for the comparison of the cells' implementations
(fused, naive, TorchScript) and for evaluation; the mLSTM recipe through
the trainer is :mod:`bench.family_trainer`.

    python -m bench.multiplicative --cells mlstm mgru --repeats 3
    python -m bench.multiplicative --cells mrnn --steps 1 --repeats 1 \
        --impls fused torch --no-record   # a quick check
"""

from bench.harness.options import paired_parser
from bench.harness.options import parse
from bench.harness.processes import medians
from bench.harness.processes import run_children
from bench.harness.processes import thread_env
from bench.harness.processes import vs
from bench.harness.records import malloc_fields
from bench.harness.records import record
from bench.harness.records import record_fields
from bench.harness.records import write_records
from bench.harness.timing import EVAL_PASSES
from bench.harness.timing import KERAS_EVAL
from bench.harness.timing import keras_lm_rates
from bench.harness.torch_side import LMRunner
from bench.harness.torch_side import set_torch_threads
from bench.harness.torch_side import torch_label
from bench.harness.torch_side import torch_rates

#: This bench (its children run ``python -m bench.multiplicative --child``).
MODULE = "bench.multiplicative"

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
    rates = keras_lm_rates(
        model,
        cfg,
        VOCAB,
        BATCH,
        BPTT,
        steps,
        steps,
        train_passes=EVAL_PASSES,
    )
    return (*rates, model.count_params())


def measure_torch(cell, steps, jit=False):
    import torch

    from bench.reference.multiplicative import CharLM

    set_torch_threads(torch)
    torch.manual_seed(0)
    lm = CharLM(cell, _units(cell), VOCAB, jit=jit, batch=BATCH)
    runner = LMRunner(
        lm.forward,
        lambda: lm.zero_state(BATCH),
        lm.params,
        torch.optim.Adam(lm.params, lr=1e-3),
        5.0,
    )
    rates = torch_rates(
        runner, VOCAB, BATCH, BPTT, steps, steps, train_passes=EVAL_PASSES
    )
    return (*rates, sum(p.numel() for p in lm.params))


def measure(impl, cell, steps):
    if impl in ("torch", "torch_jit"):
        result = measure_torch(cell, steps, jit=impl == "torch_jit")
    else:
        result = measure_keras(impl, cell, steps)
    return dict(zip(("train", "eval", "params"), result))


def fastest_torch(med):
    """The PyTorch reference of each phase: the faster of the plain loop
    and the TorchScript-traced step, where both ran."""
    torch_impls = [i for i in ("torch", "torch_jit") if i in med]
    if not torch_impls:
        return {}
    return {
        phase: max(torch_impls, key=lambda i: med[i][phase])
        for phase in ("train", "eval")
    }


def impl_records(cell, impl, med, samples, best):
    """The two records (training, evaluation) of ``impl`` on ``cell``."""
    m, records = med[impl], []
    for phase in ("train", "eval"):
        lstm = med["lstm"][phase] if "lstm" in med else None
        torch_ref = med[best[phase]][phase] if best else None
        jit = " (TorchScript)" if best.get(phase) == "torch_jit" else ""
        records.append(
            record(
                "throughput",
                f"charlm_{cell}_paper_{phase}",
                impl if impl != "lstm" else "lstm_240",
                m[phase],
                "char/s",
                torch_ref,
                torch_label("same cell, same run") + jit,
                params=int(m["params"]),
                **malloc_fields(
                    samples.get(impl, []),
                    samples.get(best[phase]) if best else None,
                ),
                ratio_to_fused_lstm=round(m[phase] / lstm, 3) if lstm else None,
            )
        )
    line = (
        f"{cell:7s} {impl:6s} {int(m['params']):7d} params  train "
        f"{m['train']:7.0f} char/s  eval {m['eval']:7.0f} char/s"
    )
    if best and not impl.startswith("torch"):
        ref = {ph: med[best[ph]][ph] for ph in ("train", "eval")}
        line += vs(m, ref, f"torch best: {best['train']} / {best['eval']}")
    if "lstm" in med and impl != "lstm":
        line += vs(m, med["lstm"], "lstm")
    print(line, flush=True)
    return records


def main(argv=None):
    impls = ["fused", "naive", "lstm", "torch", "torch_jit"]
    p = paired_parser(MODULE, __doc__, "multiplicative.jsonl", impls, repeats=3)
    cells = ["mlstm", "tmlstm", "mgru", "tmgru", "mrnn"]
    p.add_argument("--cells", nargs="+", default=cells)
    p.add_argument("--steps", type=int, default=10)
    args = parse(p, measure, argv)
    env = thread_env(args.threads)
    fields = record_fields(
        MODULE, argv, threads=args.threads or None, keras_eval=KERAS_EVAL
    )
    records = []
    lstm = None  # the LSTM of equal parameters runs with the first cell
    for cell in args.cells:
        impls = [i for i in args.impls if not (i == "lstm" and lstm)]
        samples = run_children(
            MODULE, impls, args.repeats, env, cell=cell, steps=args.steps
        )
        med = medians(samples, ("train", "eval", "params"))
        if "lstm" in med:
            lstm = med["lstm"]
        elif lstm:
            med["lstm"] = lstm
        best = fastest_torch(med)
        for impl in med:
            if impl != "lstm" or cell == args.cells[0]:
                records += impl_records(cell, impl, med, samples, best)
    write_records(args, records, fields)


if __name__ == "__main__":
    main()
