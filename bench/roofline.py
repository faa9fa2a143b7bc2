"""Roofline fraction at one thread: the share of one core's matrix-product
peak that each family's training and evaluation reach, Keras and PyTorch
side by side.

* **Peak**: one thread (TensorFlow's pools, torch's threads and OpenMP
  at 1), a 1024 x 1024 by 1024 x 1024 float32 product, the median of 20
  calls, through TensorFlow (oneDNN) and through torch (MKL); the roof is
  the faster of the two.
* **Work per token**: the forward pass's floating-point operations, as
  XLA counts them (``cost_analysis`` of the jitted forward pass on JAX, at
  batch 2). XLA counts a loop's body once, so the count is taken at 2 and
  3 time steps: their difference is the work outside the loops per token,
  and the rest of the 2-step count is one step of the loops. A training
  token is counted as 3x a forward token (forward, and a backward of
  twice its products), the usual estimate; the regularisers' masks and
  the optimizer's update are left out. The Major-Minor LSTM is counted
  with its two branches as two loops, as TensorFlow runs them.
* **Rates**: the newest one-thread records of the throughput benches in
  ``bench/results`` made on this machine's CPU class (``awd.jsonl``,
  ``throughput.jsonl``, ``multiplicative.jsonl``, ``multicell.jsonl``):
  a fraction never mixes two CPUs.

fraction = rate x work per token / peak. Records (kind ``analysis``) are
appended to ``bench/results/roofline.jsonl``.

    python -m bench.roofline
"""

import dataclasses
import json
import os

from bench.harness import RESULTS
from bench.harness.machine import device_class
from bench.harness.machine import this_class
from bench.harness.options import add_child_argument
from bench.harness.options import add_output_arguments
from bench.harness.options import bench_parser
from bench.harness.options import parse
from bench.harness.processes import run_child
from bench.harness.processes import thread_env
from bench.harness.records import record
from bench.harness.records import record_fields
from bench.harness.records import write_records
from bench.harness.timing import median_ms
from bench.harness.torch_side import set_torch_threads

#: This bench (its children run ``python -m bench.roofline --child``).
MODULE = "bench.roofline"

#: (record file, record name without the phase, Keras model, torch model,
#: how the FLOP child builds the config)
FAMILIES = [
    ("throughput.jsonl", "zaremba_small", "keras_rnnlm", "torch", "zs"),
    ("throughput.jsonl", "zaremba_medium", "keras_rnnlm", "torch", "zm"),
    ("awd.jsonl", "awd_lstm_ptb_cpu", "keras", "torch", "awd_lstm/cpu"),
    ("awd.jsonl", "awd_lstm_ptb_paper", "keras", "torch", "awd_lstm/paper"),
    ("awd.jsonl", "awd_lstm_mos_ptb_cpu", "keras", "torch", "awd_lstm_mos/cpu"),
    ("awd.jsonl", "awd_lstm_doc_ptb_cpu", "keras", "torch", "awd_lstm_doc/cpu"),
    ("awd.jsonl", "mmlstm_ptb_cpu", "keras", "torch", "mmlstm/cpu"),
    ("multiplicative.jsonl", "charlm_mlstm_paper", "fused", "torch", "mlstm"),
    (
        "multicell.jsonl",
        "multicell_model_small_m10_max",
        "fused",
        "torch",
        "multicell",
    ),
]
PHASES = ("train", "eval", "eval_b10", "eval_b1")


def _config(key):
    """``(ModelConfig, vocabulary)`` of a family (see :data:`FAMILIES`)."""
    from bench import awd_throughput
    from bench import multicell
    from bench import multiplicative
    from bench import throughput

    if key in ("zs", "zm"):
        size = {"zs": "small", "zm": "medium"}[key]
        hidden = throughput.SIZES[size][0]
        return throughput.model_config("keras_rnnlm", hidden), throughput.VOCAB
    if key == "mlstm":
        cfg = multiplicative.model_config("fused", "mlstm")
        return cfg, multiplicative.VOCAB
    if key == "multicell":
        cfg = multicell.model_config("fused", "small", 10, "max")
        return cfg, multicell.VOCAB
    name, preset = key.split("/")
    cfg = awd_throughput.recipe_config(name, preset).model
    if cfg.cell == "mmlstm":  # two loops, as on TensorFlow
        kwargs = {**cfg.cell_kwargs, "fuse_branches": False}
        cfg = dataclasses.replace(cfg, cell_kwargs=kwargs)
    return cfg, 10000


def forward_flops(key, batch=2):
    """Forward FLOPs per token of a family's model (JAX child)."""
    import jax
    import numpy as np

    from keras_rnnlm.loops.recurrence import set_forward_only
    from keras_rnnlm.models import build_language_model

    cfg, vocab = _config(key)

    def count(steps):
        model = build_language_model(cfg, vocab, batch, seed=0)
        set_forward_only(model)
        tv = [v.value for v in model.trainable_variables]
        ntv = [v.value for v in model.non_trainable_variables]
        x = np.zeros((batch, steps), "int32")

        def forward(tv, ntv, x):
            return model.stateless_call(tv, ntv, x, training=False)[0]

        cost = jax.jit(forward).lower(tv, ntv, x).compile().cost_analysis()
        cost = cost[0] if isinstance(cost, list) else cost
        return cost["flops"] / batch

    two, three = count(2), count(3)
    outside = three - two  # per token, outside the loops
    loops = two - 2 * outside  # one step of the loops (counted once)
    return {"outside": outside, "loops": loops, "total": outside + loops}


def peak(n=1024, calls=20):
    """One-thread float32 matrix-product GFLOP/s, TensorFlow and torch."""
    import numpy as np
    import tensorflow as tf
    import torch

    set_torch_threads(torch)
    a = np.random.default_rng(0).standard_normal((n, n)).astype("float32")
    ta, pa = tf.constant(a), torch.from_numpy(a)
    product = tf.function(lambda x: tf.matmul(x, x))

    def rate(fn):
        return 2 * n**3 / (median_ms(fn, calls) / 1000) / 1e9

    return {
        "tensorflow": rate(lambda: product(ta).numpy()),
        "torch": rate(lambda: torch.mm(pa, pa)),
    }


def measure(impl, key=None):
    if impl == "flops":
        return forward_flops(key)
    return peak()


def newest(records, name, model):
    """The newest one-thread record ``name`` of ``model`` made on this
    machine's CPU class, or None."""
    here, found = this_class(), None
    for r in records:
        if (
            r.get("name") == name
            and r.get("model") == model
            and str(r.get("threads")) == "1"
            and device_class(r) == here
        ):
            found = r
    return found


def family_records(family, flops, gflops):
    """The roofline records of one family (see :data:`FAMILIES`)."""
    path, name, keras_model, torch_model, _ = family
    with open(os.path.join(RESULTS, path)) as f:
        rates = [json.loads(line) for line in f if line.strip()]
    records = []
    for phase in PHASES:
        found = {
            m: newest(rates, f"{name}_{phase}", m)
            for m in (keras_model, torch_model)
        }
        if not all(found.values()):
            continue
        work = flops["total"] * (3 if phase == "train" else 1)
        frac = {m: r["value"] * work / (gflops * 1e9) for m, r in found.items()}
        print(
            f"{name:32s} {phase:9s} {work / 1e6:8.2f} MFLOP/token  "
            f"keras {frac[keras_model]:6.1%}  torch {frac[torch_model]:6.1%}"
        )
        for m, r in found.items():
            records.append(
                record(
                    "analysis",
                    f"roofline_{name}_{phase}",
                    m,
                    100 * frac[m],
                    "% of one-thread peak",
                    100 * frac[torch_model],
                    "torch, its one-thread record",
                    digits=2,
                    rate=r["value"],
                    rate_unit=r["unit"],
                    rate_command=r["command"],
                    rate_date=r["date"],
                    mflop_per_token=round(work / 1e6, 3),
                    mflop_outside_loops=round(flops["outside"] / 1e6, 3),
                    mflop_loops=round(flops["loops"] / 1e6, 3),
                )
            )
    return records


def main(argv=None):
    p = bench_parser(MODULE, __doc__)
    add_output_arguments(p, "roofline.jsonl")
    add_child_argument(p)
    args = parse(p, measure, argv)
    roof = run_child(MODULE, {"impl": "peak"}, thread_env(1))
    gflops = max(roof["tensorflow"], roof["torch"])
    print(
        f"one-thread peak: TensorFlow {roof['tensorflow']:.1f}, torch "
        f"{roof['torch']:.1f} GFLOP/s"
    )
    jax_env = thread_env(1, KERAS_BACKEND="jax")
    fields = record_fields(
        MODULE,
        argv,
        threads=1,
        peak_gflops=round(gflops, 1),
        peak_tensorflow_gflops=round(roof["tensorflow"], 1),
        peak_torch_gflops=round(roof["torch"], 1),
    )
    records = []
    for family in FAMILIES:
        flops = run_child(MODULE, {"impl": "flops", "key": family[-1]}, jax_env)
        records += family_records(family, flops, gflops)
    write_records(args, records, fields)


if __name__ == "__main__":
    main()
