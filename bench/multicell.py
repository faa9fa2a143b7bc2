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
* ``torch``: the same multi-cell cell in PyTorch CPU
  (:mod:`bench.reference.multicell`: input projection hoisted, a Python
  loop over time, eager autograd).

Each measurement runs in a fresh subprocess; repeats are interleaved and
the median is reported. Results are printed and appended to
``bench/results/multicell.jsonl`` (``--out``).

What it leaves out: the trainer's path (the recipe's data pipeline,
callbacks, checkpoints, validation): random tokens through ``model.fit``.
It stays for the implementations' comparison (fused, autodiff, naive,
LSTM), the cell counts and strategies, and evaluation; the recipe through
the trainer is :mod:`bench.family_trainer`.

    python -m bench.multicell --sizes small --cells 10 --strategy max
    python -m bench.multicell --scope layer --impls fused autodiff lstm naive
    python -m bench.multicell --sizes small --steps 2 --repeats 1 \
        --eval-tokens 1400 --impls fused torch --no-record   # a quick check
"""

from bench.harness.options import add_eval_tokens_argument
from bench.harness.options import paired_parser
from bench.harness.options import parse
from bench.harness.options import windows_for
from bench.harness.processes import medians
from bench.harness.processes import run_children
from bench.harness.processes import thread_env
from bench.harness.processes import vs
from bench.harness.records import malloc_fields
from bench.harness.records import record
from bench.harness.records import record_fields
from bench.harness.records import write_records
from bench.harness.timing import KERAS_EVAL
from bench.harness.timing import keras_lm_rates
from bench.harness.timing import keras_rates
from bench.harness.torch_side import LMRunner
from bench.harness.torch_side import set_torch_threads
from bench.harness.torch_side import torch_label
from bench.harness.torch_side import torch_rates

#: This bench (its children run ``python -m bench.multicell --child``).
MODULE = "bench.multicell"

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
    rates = keras_lm_rates(model, cfg, VOCAB, BATCH, BPTT, steps, eval_steps)
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
    rates = keras_rates(model, (x, y), (x,), BATCH)
    return (*rates, model.count_params())


def measure_torch(size, cells, strategy, steps, eval_steps):
    import torch

    from bench.reference.multicell import MultiCellLM

    set_torch_threads(torch)
    torch.manual_seed(0)
    units, p = SIZES[size]
    model = MultiCellLM(VOCAB, units, cells, strategy, p)
    params = list(model.parameters())
    runner = LMRunner(
        model,
        lambda: model.zero_state(BATCH),
        params,
        torch.optim.SGD(params, lr=1.0),
        0.15,
    )
    rates = torch_rates(
        runner, VOCAB, BATCH, BPTT, steps, eval_steps, modules=[model]
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


def size_records(args, size, impls, eval_steps):
    """Runs the children of one size; returns its records."""
    samples = run_children(
        MODULE,
        impls,
        args.repeats,
        thread_env(args.threads),
        size=size,
        cells=args.cells,
        strategy=args.strategy,
        steps=args.steps,
        eval_steps=eval_steps,
        scope=args.scope,
    )
    med = medians(samples, ("train", "eval", "params"))
    ref = med.get("torch")
    records = []
    for impl, m in med.items():
        for phase in ("train", "eval"):
            rec = record(
                "throughput",
                f"multicell_{args.scope}_{size}_"
                f"m{args.cells}_{args.strategy}_{phase}",
                impl,
                m[phase],
                "tok/s",
                ref and ref[phase],
                torch_label("same cell, same run"),
                params=int(m["params"]),
                eval_tokens=eval_steps * BATCH * BPTT,
                **malloc_fields(
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
                line += vs(m, med[other], other)
        print(line, flush=True)
    return records


def main(argv=None):
    impls = ["fused", "naive", "lstm", "torch"]
    p = paired_parser(MODULE, __doc__, "multicell.jsonl", impls, repeats=2)
    p.add_argument("--sizes", nargs="+", default=["small", "medium"])
    p.add_argument("--cells", type=int, default=10)
    p.add_argument("--strategy", default="max")
    p.add_argument("--steps", type=int, default=20)
    add_eval_tokens_argument(p)  # model scope only
    p.add_argument(
        "--scope",
        choices=("model", "layer"),
        default="model",
        help="the whole language model, or one recurrent layer alone",
    )
    args = parse(p, measure, argv)
    fields = record_fields(
        MODULE, argv, threads=args.threads or None, keras_eval=KERAS_EVAL
    )
    layer_only = args.scope == "layer"
    impls = [i for i in args.impls if not (i == "torch" and layer_only)]
    eval_steps = (
        args.steps if layer_only else windows_for(args.eval_tokens, BATCH, BPTT)
    )
    records = []
    for size in args.sizes:
        records += size_records(args, size, impls, eval_steps)
    write_records(args, records, fields)


if __name__ == "__main__":
    main()
