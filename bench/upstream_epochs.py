"""Training through the trainer, beside the original awd-lstm-lm.

    python -m bench.upstream_epochs --preset cpu --threads 1 \\
        --warmup 20 --batches 100 --backend tensorflow jax --repeats 2
    python -m bench.upstream_epochs --preset cpu --threads 2 --isa avx2 \\
        --warmup 20 --batches 100
    python -m bench.upstream_epochs --preset paper --budget 300
    python -m bench.upstream_epochs --isa avx2 --check-isa
    python -m bench.upstream_epochs --preset cpu --warmup 2 --batches 3 \\
        --no-record                     # a functional check

Runs ``keras-rnnlm train recipes/awd_lstm_ptb.py --preset P`` as a user
does (the console script's entry: variable BPTT, every callback,
checkpoints, validation; only ``train.verbose=0`` and
``train.timing_log=true`` set) and salesforce/awd-lstm-lm's ``main.py``
with the same hyperparameters, from a temporary copy of ``--reference``
(its README's command; ``--threads N`` sets ``torch.set_num_threads``),
each in a fresh process, ``--repeats`` times, interleaved (each backend
of ``--backend``, then upstream, then again). Two measures:

* ``--warmup W --batches N``: tokens/s after the warm-up, both sides by
  one rule: the tokens of batches W+1 .. W+N of the first epoch over the
  time from the end of batch W to the end of batch W+N, each batch's
  tokens counted exactly (rows x its window's length). The trainer's
  batch ends come from its own ``timing.csv`` (``train.timing_log``:
  written after each batch's loss is read back, every callback's batch
  work included); upstream's from its timing flags (``--time_warmup W
  --time_batches N --time_out FILE``, which end the process). The
  trainer is killed once it has written batch W+N. Records
  ``awd_lstm_ptb_P[_jax]_train`` (tok/s; ``_jax``: the trainer on JAX)
  and ``..._train_peak_rss`` (MB: each process's own peak resident
  memory, its ``VmHWM`` read while it runs, the killed trainer's too;
  ``wait4``'s would count this bench's, ~700 MB with TensorFlow
  imported). Each run is followed by a fresh process of its side's
  imports alone (``import keras_rnnlm, tensorflow`` under the trainer's
  environment, ``import torch`` under upstream's): the record carries
  their peaks (``keras_import_rss_mb``, ``reference_import_rss_mb``) and
  each side's median peak above its import (``keras_growth_mb``,
  ``reference_growth_mb``), so the trainer is within PyTorch's peak plus
  the frameworks' baseline when its growth is no more than upstream's.
* ``--budget S`` alone: whole epochs for S seconds a run: seconds an
  epoch with validation (the trainer: between the ``epoch_end`` rows of
  ``timing.csv``, written after validation and checkpoints; upstream:
  the epoch time it prints, which includes its validation), the median
  over the epochs after the first; the end of the first epoch from the
  start (start-up and compilation included); the validation perplexity
  at the last epoch both reached. Records ``..._train_epoch_s``,
  ``..._first_epoch_end`` and ``..._val_ppl_epochK``. (With
  ``--batches``, ``--budget`` is the most a run may take before it is
  abandoned.)

Variable BPTT and compilation: the trainer compiles its step once a
window length (JAX jits the step a shape; the recurrent loops are XLA
programs on TensorFlow too). The data pipeline of the PTB presets, with
their defaults (``data.bptt_max_delta`` 40; ``cpu``:
``data.bptt_multiple`` 5), draws 10-12 distinct lengths an epoch for
``cpu`` (bptt 35; 14 over the first five epochs; 7-8 in an epoch's first
120 batches, 5-6 in its first 20) and 44-49 for ``paper`` (bptt 70,
exact lengths; 59 over five epochs; 27-29 in the first 120 batches,
11-14 in the first 20). So batches W+1 .. W+N can hold compilations:
the tok/s record counts them (``keras_new_length_batches``: timed
batches whose length no batch before them had) and gives the rate
without them (``keras_tok_s_seen_lengths``).

``--isa avx2`` caps both sides' libraries at AVX2
(:mod:`bench.harness.isa`: ``ONEDNN_MAX_CPU_ISA=AVX2``,
``XLA_FLAGS=--xla_cpu_max_isa=AVX2
--xla_cpu_experimental_ynn_fusion_type=``, ``ATEN_CPU_CAPABILITY=avx2``,
``MKL_ENABLE_INSTRUCTIONS=AVX2``); ``--isa default`` (the default)
clears them. The records' ``isa_cap`` names the knobs (so a capped run
is a CPU class of its own) and ``isa_env`` the variables the children
had. ``--check-isa`` prints what each library then runs, and exits.
Checked on the AMD EPYC (AVX-512, 2 cores) with TensorFlow 2.21, jaxlib
0.10.2 and torch 2.13: oneDNN reports ``Intel AVX2`` (uncapped ``Intel
AVX-512 with Intel DL Boost and bfloat16 support``); the code XLA
generates for a small jitted function has no AVX-512 register, in
TensorFlow's XLA and in JAX's (802 instructions with one uncapped: XLA
prefers 256-bit vectors, so it uses the upper ``ymm16-31`` and mask
registers of AVX-512VL, not ``zmm``); torch's capability reads ``AVX2``.
XLA hands some fusions (the matrix products of the trainer's loops,
reductions) to YNNPACK, which picks its kernels from the CPU whatever
the cap (a capped TensorFlow trainer's profile, ``perf``: 8 % of its
samples in ``ynn::dot_fp32_5x64x1_1x16x1_avx512f``), so the cap also
turns YNNPACK off: those fusions then run in oneDNN (capped) and Eigen
(built for AVX): no named kernel of the profile is an AVX-512 one, and
its JIT code is XLA's and oneDNN's, both capped -- where an AVX2 CPU
would run YNNPACK's AVX2 kernels. Left uncapped: glibc's string
functions (``__memmove_avx512_unaligned_erms``, about 1 % of the
samples). MKL runs its AVX2 "zen" kernels
(``mkl_blas_def_sgemm_kernel_0_zen``) on this AMD CPU with or without
the cap, so upstream's matrix products are AVX2 either way here.

Threads: ``--threads N`` sets TensorFlow's pools, OpenMP's, JAX's XLA
pool (``PJRT_NPROC``) and upstream's ``--threads`` (0: every default).
``--set`` overrides go to the trainer only.

The measuring set for an idle machine (both ISAs, both thread counts,
TensorFlow and JAX, a paper pair): ``bash bench/jobs/avx2_trainer.sh``.
"""

import json
import os
import re
import shutil
import statistics
import sys
import tempfile

from bench.harness import ROOT
from bench.harness.isa import ISA_SETTINGS
from bench.harness.isa import check_isa
from bench.harness.options import PTB_TRAIN_TOKENS
from bench.harness.options import add_output_arguments
from bench.harness.options import bench_parser
from bench.harness.processes import KERAS_IMPORT
from bench.harness.processes import TORCH_IMPORT
from bench.harness.processes import growth_mb
from bench.harness.processes import import_rss_mb
from bench.harness.processes import interleave
from bench.harness.processes import watch
from bench.harness.records import record
from bench.harness.trainer_runs import add_run_arguments
from bench.harness.trainer_runs import checked
from bench.harness.trainer_runs import child_env
from bench.harness.trainer_runs import first_epoch_batches
from bench.harness.trainer_runs import keras_rate
from bench.harness.trainer_runs import ran
from bench.harness.trainer_runs import report_records
from bench.harness.trainer_runs import run_trainer
from bench.harness.trainer_runs import trainer_command

MODULE = "bench.upstream_epochs"
REFERENCE_NAME = "salesforce/awd-lstm-lm (main.py, PyTorch)"
BACKENDS = ("tensorflow", "jax")

#: main.py's flags for each preset of recipes/awd_lstm_ptb.py (its
#: README's PTB command; the ``cpu`` shape of the reference README).
UPSTREAM_FLAGS = {
    "paper": "--batch_size 20 --dropouti 0.4 --dropouth 0.25 --seed 141",
    "cpu": "--emsize 200 --nhid 400 --nlayers 3 --batch_size 20 --bptt 35 "
    "--lr 30 --clip 0.25 --dropout 0.4 --dropouth 0.25 --dropouti 0.4 "
    "--dropoute 0.1 --wdrop 0.5 --seed 141",
}
#: Rows of the preset's training batch (tokens of a batch: rows x length).
BATCH_ROWS = 20


def parser():
    p = bench_parser(MODULE, __doc__)
    p.add_argument("--preset", choices=sorted(UPSTREAM_FLAGS), default="cpu")
    p.add_argument(
        "--backend",
        nargs="+",
        choices=BACKENDS,
        default=["tensorflow"],
        help="the trainer's Keras backend(s) (KERAS_BACKEND)",
    )
    p.add_argument("--isa", choices=sorted(ISA_SETTINGS), default="default")
    p.add_argument(
        "--check-isa",
        action="store_true",
        help="print what each library runs under --isa, and exit",
    )
    p.add_argument("--warmup", type=int, default=20, help="untimed batches")
    p.add_argument(
        "--batches",
        type=int,
        default=0,
        help="timed batches (tokens/s mode); 0: whole epochs for --budget s",
    )
    p.add_argument(
        "--budget",
        type=float,
        default=None,
        help="seconds a run (epochs; default 600) or the most a tokens/s "
        "run may take (default 1800)",
    )
    add_run_arguments(p, ROOT)
    p.add_argument("--set", action="append", default=[], dest="sets")
    p.add_argument("--impls", nargs="+", default=["keras", "upstream"])
    add_output_arguments(p, "upstream_epochs.jsonl")
    return p


# -- the runs ------------------------------------------------------------------


def keras_command(args, out):
    """The trainer's command line, as a user runs it."""
    recipe = os.path.join(ROOT, "recipes", "awd_lstm_ptb.py")
    return trainer_command(recipe, args.preset, out, args.sets)


def upstream_command(args, ref, work):
    """main.py's command line (run in ``ref``, the reference's copy)."""
    cmd = [
        sys.executable,
        "main.py",
        "--data",
        os.path.join(os.path.abspath(args.data), "ptb"),
        "--save",
        os.path.join(work, "ref.pt"),
        *UPSTREAM_FLAGS[args.preset].split(),
    ]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    if args.batches:
        return cmd + [
            "--epochs",
            "1",
            "--time_warmup",
            str(args.warmup),
            "--time_batches",
            str(args.batches),
            "--time_out",
            os.path.join(work, "timing.json"),
        ]
    return cmd + ["--epochs", "1000"]


def run_keras(args, backend, work):
    """One trainer run on ``backend``: its batch and epoch-end rows, its
    log.csv rows, start time, peak RSS and exit
    (:func:`~bench.harness.trainer_runs.run_trainer`), and the peak RSS
    of its imports alone (``import_rss_mb``)."""
    env = child_env(args.threads, args.isa, args.data, backend)
    run = run_trainer(
        keras_command(args, os.path.join(work, "run")),
        env,
        args.warmup + args.batches if args.batches else 0,
        args.budget,
        work,
    )
    return {**run, "import_rss_mb": import_rss_mb(KERAS_IMPORT, env)}


def run_upstream(args, ref, work):
    """One main.py run: its timing file (tokens/s mode) or printed epoch
    lines (epochs), peak RSS and exit, and the peak RSS of ``import
    torch`` alone (``import_rss_mb``)."""
    log = os.path.join(work, "upstream.log")
    env = child_env(args.threads, args.isa, args.data)
    proc = watch(
        upstream_command(args, ref, work),
        env,
        lambda: False,
        args.budget,
        cwd=ref,
        log=log,
    )
    run = {**proc, "import_rss_mb": import_rss_mb(TORCH_IMPORT, env)}
    path = os.path.join(work, "timing.json")
    if os.path.exists(path):
        with open(path) as f:
            run["timing"] = json.load(f)
    with open(log) as f:
        run["epochs"] = [
            {"epoch": int(e), "seconds": float(s), "val_ppl": float(p)}
            for e, s, p in _EPOCH_LINE.findall(f.read())
        ]
    run["log"] = log
    return checked(run)


_EPOCH_LINE = re.compile(
    r"end of epoch\s+(\d+) \| time:\s*([\d.]+)s .*valid ppl\s+([\d.]+)"
)


# -- the figures ---------------------------------------------------------------


def upstream_rate(run):
    """Upstream's tokens/s after the warm-up from its timing file (its
    batch times and tokens; the same rule as
    :func:`~bench.harness.trainer_runs.span_rate`), and its peak RSS; None
    without the file."""
    timing = run.get("timing")
    if not timing:
        return None
    seconds, tokens = sum(timing["batch_s"]), sum(timing["batch_tokens"])
    return {
        "tok_s": tokens / seconds,
        "tokens": tokens,
        "rss_mb": run["rss_mb"],
    }


def keras_epochs(run):
    """``(seconds of each epoch, validation perplexities)`` of a trainer
    run: the time between its ``epoch_end`` rows (the first from the
    start) and its log.csv."""
    ends = [
        r["time"] - run["start"]
        for r in run["rows"]
        if r["event"] == "epoch_end"
    ]
    seconds = [b - a for a, b in zip([0.0] + ends, ends)]
    return seconds, [float(r["val_ppl"]) for r in run["epochs"]]


def upstream_epochs(run):
    """``(seconds of each epoch, validation perplexities)`` as main.py
    printed them."""
    return (
        [e["seconds"] for e in run["epochs"]],
        [e["val_ppl"] for e in run["epochs"]],
    )


def _round(value, digits=2):
    return None if value is None else round(value, digits)


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _stem(args, backend):
    suffix = "" if backend == "tensorflow" else f"_{backend}"
    return f"awd_lstm_ptb_{args.preset}{suffix}"


def _imports(runs):
    return [r.get("import_rss_mb") for r in runs]


def rate_records(args, samples):
    """The tokens/s and peak-RSS records of each backend against
    upstream."""
    ref = [upstream_rate(r) for r in samples.get("upstream", [])]
    ref_tok = _median(r and r["tok_s"] for r in ref)
    ref_rss = _median(r and r["rss_mb"] for r in ref)
    ref_import = _imports(samples.get("upstream", []))
    ref_growth = growth_mb([r and r["rss_mb"] for r in ref], ref_import)
    out = []
    for backend in args.backend:
        got = [
            keras_rate(r, args.warmup, args.batches)
            for r in samples.get(backend, [])
        ]
        ok = [g for g in got if g]
        if not ok:
            print(
                f"{backend}: no run reached batch {args.warmup + args.batches}"
            )
            continue
        stem, tok = _stem(args, backend), _median(g["tok_s"] for g in ok)
        each = {k: [g and _round(g[k]) for g in got] for k in ok[0]}
        imports = _imports(samples.get(backend, []))
        growth = growth_mb([g and g["rss_mb"] for g in got], imports)
        out.append(
            record(
                "throughput",
                f"{stem}_train",
                "keras",
                tok,
                "tok/s",
                ref_tok,
                REFERENCE_NAME,
                backend=backend,
                warmup=args.warmup,
                batches=args.batches,
                keras_tok_s=each["tok_s"],
                reference_tok_s=[r and round(r["tok_s"], 1) for r in ref],
                keras_tok_s_seen_lengths=each["tok_s_seen_lengths"],
                keras_new_length_batches=each["new_length_batches"],
                keras_first_batch_s=each["first_batch_s"],
                keras_tokens=each["tokens"],
                reference_tokens=[r and r["tokens"] for r in ref],
                est_train_s_per_epoch=round(PTB_TRAIN_TOKENS / tok),
                isa_setting=args.isa,
            )
        )
        out.append(
            record(
                "memory",
                f"{stem}_train_peak_rss",
                "keras",
                _median(g["rss_mb"] for g in ok),
                "MB",
                ref_rss,
                REFERENCE_NAME,
                digits=0,
                lower_is_better=True,
                backend=backend,
                keras_rss_mb=each["rss_mb"],
                reference_rss_mb=[r and round(r["rss_mb"]) for r in ref],
                keras_import_rss_mb=[_round(i, 1) for i in imports],
                reference_import_rss_mb=[_round(i, 1) for i in ref_import],
                keras_growth_mb=_round(growth, 1),
                reference_growth_mb=_round(ref_growth, 1),
                note=RSS_NOTE,
            )
        )
    return out


RSS_NOTE = (
    "peak resident memory of each process itself (VmHWM, read while it "
    "ran): the trainer killed after its timed batches, upstream at its "
    "exit after them; import_rss_mb: a fresh process of each side's "
    "imports alone (`import keras_rnnlm, tensorflow`, `import torch`) "
    "under its environment; growth_mb: the median peak less the import "
    "(the trainer's within PyTorch's + the frameworks' baseline when "
    "keras_growth_mb <= reference_growth_mb)"
)


def epoch_records(args, samples):
    """Seconds an epoch, the first epoch's end and the validation
    perplexity of each backend against upstream."""
    ref_runs = [
        upstream_epochs(r) for r in samples.get("upstream", []) if ran(r)
    ]
    ref_s = _median(s for secs, _ in ref_runs for s in secs[1:])
    ref_ppl = ref_runs[0][1] if ref_runs else []
    out = []
    for backend in args.backend:
        runs = [keras_epochs(r) for r in samples.get(backend, []) if ran(r)]
        if not runs:
            continue
        stem = _stem(args, backend)
        steady = _median(s for secs, _ in runs for s in secs[1:])
        firsts = [secs[0] for secs, _ in runs if secs]
        ppl = runs[0][1] if runs else []
        both = min(len(ppl), len(ref_ppl))
        each = {"backend": backend, "isa_setting": args.isa}
        if steady is not None:
            out.append(
                record(
                    "throughput",
                    f"{stem}_train_epoch_s",
                    "keras",
                    steady,
                    "s/epoch",
                    ref_s,
                    REFERENCE_NAME,
                    digits=2,
                    lower_is_better=True,
                    keras_epoch_s=[
                        [round(s, 2) for s in secs] for secs, _ in runs
                    ],
                    reference_epoch_s=[secs for secs, _ in ref_runs],
                    **each,
                )
            )
        out.append(
            record(
                "latency",
                f"{stem}_first_epoch_end",
                "keras",
                _median(firsts) if firsts else args.budget,
                "s",
                digits=1,
                lower_bound=not firsts,
                epochs_in_budget=[len(secs) for secs, _ in runs],
                **each,
            )
        )
        if both:
            out.append(
                record(
                    "quality",
                    f"{stem}_val_ppl_epoch{both}",
                    "keras",
                    ppl[both - 1],
                    "ppl",
                    ref_ppl[both - 1],
                    REFERENCE_NAME,
                    digits=2,
                    lower_is_better=True,
                    keras_val_ppl=ppl,
                    reference_val_ppl=ref_ppl,
                    **each,
                )
            )
    return out


# -- the bench -----------------------------------------------------------------


def measure_all(args):
    """``{key: [run per repeat]}`` of the keys (each backend, then
    ``upstream``), the repeats interleaved, each run in its own folder
    and upstream's in one temporary copy of ``--reference``."""
    keys = [b for b in args.backend if "keras" in args.impls]
    keys += ["upstream"] if "upstream" in args.impls else []
    with tempfile.TemporaryDirectory(prefix="upstream_epochs_") as tmp:
        ref = os.path.join(tmp, "awd-lstm-lm")
        shutil.copytree(args.reference, ref)

        def measure(key):
            work = tempfile.mkdtemp(dir=tmp)
            if key == "upstream":
                return run_upstream(args, ref, work)
            return run_keras(args, key, work)

        return interleave(keys, args.repeats, measure, report)


def report(rep, key, run):
    """One line a run: what it got."""
    if key == "upstream":
        timing = run.get("timing")
        what = f"{len(run['epochs'])} epochs"
        what = f"{timing['tok_s']:.0f} tok/s" if timing else what
    else:
        rows = run["rows"]
        ends = sum(r["event"] == "epoch_end" for r in rows)
        what = f"{len(first_epoch_batches(rows))} batches, {ends} epoch ends"
    killed = " (killed)" if run["killed"] else ""
    print(
        f"repeat {rep + 1} {key}: {what}, peak RSS {run['rss_mb']:.0f} MB, "
        f"{run['wall_s']:.0f} s, exit {run['returncode']}{killed}",
        flush=True,
    )


def main(argv=None):
    p = parser()
    args = p.parse_args(argv)
    if args.warmup < 1:
        p.error("--warmup must be >= 1")
    if args.budget is None:
        args.budget = 1800.0 if args.batches else 600.0
    env = child_env(args.threads, args.isa, args.data)
    if args.check_isa:
        frameworks = (
            "tensorflow",
            *(["jax"] if "jax" in args.backend else []),
            "torch",
        )
        print(json.dumps(check_isa(env, frameworks), indent=2))
        return
    if not os.path.isdir(os.path.join(args.data, "ptb")):
        p.error(f"no ptb/ in --data {args.data!r} (or $KERAS_RNNLM_DATA)")
    samples = measure_all(args)
    recs = (rate_records if args.batches else epoch_records)(args, samples)
    report_records(MODULE, argv, env, args, recs)


if __name__ == "__main__":
    main()
