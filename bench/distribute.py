"""Data-parallel training throughput: 1 vs 2 (virtual) devices, and a
paper-size scaling model.

Measured: each child process runs on the JAX backend with
``XLA_FLAGS=--xla_force_host_platform_device_count=N`` (N = 1 or 2
virtual CPU devices; both share this machine's cores; ``--impls 1 1dp``:
one device without and with the data-parallel distribution; ``2proc``:
two processes joined on 127.0.0.1 through ``keras.distribution.
initialize``, one CPU device each, each feeding its own half of the
streams; the rate is process 0's), builds the
``--recipe``'s ``--preset`` model (default: AWD-LSTM PTB ``cpu``, every
regulariser on) under ``train.distribute`` (``none`` for 1 device,
``data_parallel`` for 2: the streams split over the devices, the carried
state batch-sharded; :mod:`keras_rnnlm.training.distribute`), compiles
it as the trainer does and times ``model.fit`` over ``--steps`` windows
of random token ids (after ``--warmup`` untimed ones; median of
:data:`bench.harness.timing.EVAL_PASSES` passes). Two virtual CPU devices
only split the same cores: on a 2-core machine with other work running
this measures the overhead of the partitioned step, not a speed-up.

Model (``--scaling-model``, no training): for each paper preset with a
measured single-GPU training rate in ``bench/results/awd.jsonl``, the
bytes all-reduced per step (4 bytes x parameters, float32 gradients;
a ring all-reduce sends ``2 (n - 1) / n`` times that per GPU), the
compute per step (the measured single-GPU step time divided by n: the
streams split evenly) and the interconnect bandwidth at which n GPUs
break even with one, and at which they reach 90% scaling efficiency,
for n = 2, 4, 8. A model, not a measurement.

    python -m bench.distribute --steps 10 --repeats 3
    python -m bench.distribute --scaling-model --no-record
"""

import json
import os
import socket
import statistics
import subprocess
import time

from bench.harness import RESULTS
from bench.harness import ROOT
from bench.harness.machine import device_class
from bench.harness.options import paired_parser
from bench.harness.options import parse
from bench.harness.processes import child_command
from bench.harness.processes import interleave
from bench.harness.processes import medians
from bench.harness.processes import run_child
from bench.harness.processes import thread_env
from bench.harness.records import record
from bench.harness.records import record_fields
from bench.harness.records import write_records
from bench.harness.timing import median_rate

#: This bench (its children run ``python -m bench.distribute --child``).
MODULE = "bench.distribute"

NAME = "distribute"
#: device count, and ``dp``: the data-parallel path on that many devices
#: (``1dp``: the distribution's overhead on one device, against ``1``);
#: ``2proc``: two processes with one device each (not a default)
IMPLS = ("1", "2")
PROCESSES = 2
#: The paper presets of the scaling model (``bench.awd_throughput``'s
#: models on PTB).
PAPER_PRESETS = (
    "awd_lstm_ptb",
    "awd_lstm_mos_ptb",
    "awd_lstm_doc_ptb",
    "mmlstm_ptb",
)


def measure(impl, recipe, preset, vocab, steps, warmup):
    """In a child: training tokens/s on ``impl`` devices."""
    import keras
    import numpy as np

    from keras_rnnlm.config import apply_overrides
    from keras_rnnlm.data.streams import process_rows
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.recipe import config_from_preset
    from keras_rnnlm.recipe import load_recipe
    from keras_rnnlm.training.distribute import distribution_scope
    from keras_rnnlm.training.distribute import make_distribution
    from keras_rnnlm.training.trainer import compile_model

    cfg = config_from_preset(
        load_recipe(os.path.join(ROOT, recipe)).PRESETS, preset
    )
    mode = "none" if impl == "1" else "data_parallel"
    cfg = apply_overrides(cfg, [f"train.distribute={mode}"])
    b, t = cfg.data.batch_size, cfg.data.bptt
    rng = np.random.default_rng(0)
    n = b * (steps + warmup)
    x = rng.integers(0, vocab, (n, t)).astype("int32")
    y = rng.integers(0, vocab, (n, t)).astype("int32")
    with distribution_scope(make_distribution(cfg)):
        devices = len(keras.distribution.list_devices())
        assert devices == _devices(impl), (devices, impl)
        # this process's rows of every batch (all of them with one)
        lo, hi = process_rows(b)
        x, y = (a.reshape(-1, b, t)[:, lo:hi].reshape(-1, t) for a in (x, y))
        b = hi - lo  # this process's rows (the model's batch stays B)
        keras.utils.set_random_seed(cfg.train.seed)
        model = build_language_model(
            cfg.model, vocab, cfg.data.batch_size, seed=1
        )
        compile_model(model, cfg.train)
        model.fit(x[: b * warmup], y[: b * warmup], batch_size=b, verbose=0)
        rate = median_rate(
            lambda: model.fit(
                x[b * warmup :],
                y[b * warmup :],
                batch_size=b,
                verbose=0,
                shuffle=False,
            ),
            b * t * steps,
        )
    return {
        "train": rate * cfg.data.batch_size / b,  # all processes' tokens
        "devices": devices,
        "batch": cfg.data.batch_size,
        "bptt": t,
        "params": int(model.count_params()),
    }


def _devices(impl):
    """The global device count of ``impl``."""
    if impl.endswith("proc"):
        return int(impl.removesuffix("proc"))
    return int(impl.removesuffix("dp"))


def _label(impl):
    """``1dev``, ``2dev``, ``1dev_dp``, ``2proc``."""
    if impl.endswith("proc"):
        return impl
    return f"{_devices(impl)}dev" + ("_dp" if impl.endswith("dp") else "")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_processes(params, env, timeout=1800):
    """Runs the child as :data:`PROCESSES` processes joined on 127.0.0.1
    (one device each) and returns process 0's result, as
    ``run_child`` does; kills them all when one fails."""
    env = {
        **env,
        "XLA_FLAGS": "--xla_force_host_platform_device_count=1",
        "KERAS_DISTRIBUTION_JOB_ADDRESSES": f"127.0.0.1:{_free_port()}",
        "KERAS_DISTRIBUTION_NUM_PROCESSES": str(PROCESSES),
    }
    t = time.perf_counter()
    procs = [
        subprocess.Popen(
            child_command(MODULE, params),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**env, "KERAS_DISTRIBUTION_PROCESS_ID": str(i)},
            cwd=ROOT,
        )
        for i in range(PROCESSES)
    ]
    outputs = []
    try:
        for p in procs:
            outputs.append(p.communicate(timeout=timeout))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (_, err) in zip(procs, outputs):
        if p.returncode != 0:
            raise RuntimeError(
                f"distribute.py process child {params} failed (exit code "
                f"{p.returncode}):\n{err[-4000:]}"
            )
    result = json.loads(outputs[0][0].strip().splitlines()[-1])
    result["wall_s"] = time.perf_counter() - t
    result["load_average"] = os.getloadavg()[0]
    return result


def gpu_rates():
    """``{(preset key, GPU): [single-GPU training records]}`` of the
    Keras paper presets in ``bench/results/awd.jsonl``."""
    gpu = {}
    with open(os.path.join(RESULTS, "awd.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if (
                r.get("model") == "keras"
                and r.get("name", "").endswith("_paper_gpu_train")
                and "_vs_" not in r["name"]
            ):
                key = r["name"][: -len("_paper_gpu_train")]
                gpu.setdefault((key, device_class(r)), []).append(r)
    return gpu


def scaling_row(key, gpu, records, n):
    """One row of the scaling model: ``key``'s preset on ``n`` GPUs."""
    from bench.awd_throughput import recipe_config

    rate = statistics.median(r["value"] for r in records)
    params = records[-1]["params"]
    cfg = recipe_config(key.removesuffix("_ptb"), "paper")
    b, t = cfg.data.batch_size, cfg.data.bptt
    step_s = b * t / rate
    grad_bytes = 4 * params
    sent = 2 * (n - 1) / n * grad_bytes  # ring all-reduce, per GPU
    compute = step_s / n
    return {
        "preset": key,
        "gpu": gpu,
        "gpus": n,
        "params": params,
        "batch": b,
        "bptt": t,
        "gpu_rate_tok_s": rate,
        "gpu_records": len(records),
        "step_ms_1gpu": 1000 * step_s,
        "allreduce_mb": grad_bytes / 1e6,
        "sent_per_gpu_mb": sent / 1e6,
        "compute_ms_per_gpu": 1000 * compute,
        # n GPUs as fast as one: compute + comm = step_s
        "breakeven_gb_s": sent / (step_s - compute) / 1e9,
        # 90% efficiency: compute + comm = compute / 0.9
        "eff90_gb_s": sent / (compute / 0.9 - compute) / 1e9,
        "batch_divisible": b % n == 0,
    }


def scaling_model():
    """Rows of the paper-size scaling model (see the module docstring),
    one GPU model at a time."""
    rows = []
    for (key, gpu), records in gpu_rates().items():
        if key in PAPER_PRESETS:
            rows += [scaling_row(key, gpu, records, n) for n in (2, 4, 8)]
    return rows


def model_records(args, fields):
    """Prints and records the paper-size scaling model."""
    rows = scaling_model()
    fields["device"] = (
        "none (a model from the single-GPU records of bench/results/awd.jsonl)"
    )
    for r in rows:
        print(
            f"{r['preset']:>18} x{r['gpus']}: {r['params']:,} params, "
            f"{r['allreduce_mb']:.0f} MB all-reduced, 1-GPU step "
            f"{r['step_ms_1gpu']:.1f} ms, break-even "
            f"{r['breakeven_gb_s']:.1f} GB/s, 90% efficiency "
            f"{r['eff90_gb_s']:.1f} GB/s"
        )
    records = [
        record(
            "model",
            f"{r['preset']}_paper_dp_breakeven_x{r['gpus']}",
            "scaling_model",
            r["breakeven_gb_s"],
            "GB/s",
            digits=2,
            **r,
        )
        for r in rows
    ]
    write_records(args, records, fields)


def measured_samples(args):
    """The interleaved children of every ``--impls`` setting."""
    params = {
        "recipe": args.recipe,
        "preset": args.preset,
        "vocab": args.vocab,
        "steps": args.steps,
        "warmup": args.warmup,
    }

    def env(impl):
        return thread_env(
            args.threads,
            KERAS_BACKEND="jax",
            XLA_FLAGS="--xla_force_host_platform_device_count="
            f"{_devices(impl)}",
        )

    def run(impl):
        if impl.endswith("proc"):
            return run_processes({"impl": impl, **params}, env(impl))
        return run_child(MODULE, {"impl": impl, **params}, env(impl))

    def report(rep, impl, r):
        print(f"repeat {rep}: {impl} device(s): {r['train']:.0f} tok/s")

    return interleave(args.impls, args.repeats, run, report)


def measured_records(args, samples):
    med = medians(samples, ["train"])
    ref = med.get("1", {}).get("train")
    name = f"{os.path.basename(args.recipe)[:-3]}_{args.preset}_train"
    records = []
    for impl in args.impls:
        last = samples[impl][-1]
        records.append(
            record(
                "throughput",
                f"{name}_{_label(impl)}",
                f"keras_jax_{_label(impl)}",
                med[impl]["train"],
                "tok/s",
                reference=ref if impl != "1" else None,
                reference_name="1 device" if impl != "1" else None,
                devices=_devices(impl),
                distribute="none" if impl == "1" else "data_parallel",
                processes=PROCESSES if impl.endswith("proc") else 1,
                batch=last["batch"],
                bptt=last["bptt"],
                params=last["params"],
                steps=args.steps,
                repeats=args.repeats,
                samples=[round(s["train"], 1) for s in samples[impl]],
                load_averages=[s["load_average"] for s in samples[impl]],
            )
        )
        print(f"{impl} device(s): median {med[impl]['train']:.0f} tok/s")
    return records


def main(argv=None):
    parser = paired_parser(MODULE, __doc__, f"{NAME}.jsonl", IMPLS, 3)
    parser.add_argument("--recipe", default="recipes/awd_lstm_ptb.py")
    parser.add_argument("--preset", default="cpu")
    parser.add_argument("--vocab", type=int, default=10000)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument(
        "--scaling-model",
        action="store_true",
        help="print (and record) the paper-size scaling model only",
    )
    args = parse(parser, measure, argv)
    fields = record_fields(MODULE, argv)
    if args.scaling_model:
        model_records(args, fields)
        return
    records = measured_records(args, measured_samples(args))
    write_records(args, records, fields)


if __name__ == "__main__":
    main()
