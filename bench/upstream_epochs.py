"""Whole epochs through the trainer, beside the original awd-lstm-lm.

    python -m bench.upstream_epochs --preset paper --budget 300
    python -m bench.upstream_epochs --preset cpu --budget 900 --threads 2

Runs ``keras-rnnlm train recipes/awd_lstm_ptb.py --preset P`` exactly as a
user does (variable BPTT, callbacks, checkpoints, validation every epoch)
and then salesforce/awd-lstm-lm's ``main.py`` (from a temporary copy of
``--reference``) with the same hyperparameters, each for ``--budget``
seconds of wall time, ``--repeats`` times, alternating. Reads back, for
each epoch, when it ended (the trainer: the moment its ``log.csv`` row
appeared, validation included; upstream: the epoch time it prints, which
includes its validation) and the validation perplexity. Appends records
to ``bench/results/upstream_epochs.jsonl``: seconds per epoch (median
over the epochs after the first), the seconds to the end of the first
epoch (start-up and compilation included), and the validation perplexity
at the last epoch both reached. ``--set`` overrides go to the trainer
only (say so in the record's note when the runs differ).
"""

import csv
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench.harness import ROOT
from bench.harness.options import add_output_arguments
from bench.harness.options import bench_parser
from bench.harness.processes import thread_env
from bench.harness.records import record
from bench.harness.records import record_fields
from bench.harness.records import write_records

MODULE = "bench.upstream_epochs"
REFERENCE_NAME = "salesforce/awd-lstm-lm (main.py, PyTorch)"

#: main.py's flags for each preset of recipes/awd_lstm_ptb.py (its
#: README's PTB command; the ``cpu`` shape of the reference README).
UPSTREAM_FLAGS = {
    "paper": "--batch_size 20 --dropouti 0.4 --dropouth 0.25 --seed 141",
    "cpu": "--emsize 200 --nhid 400 --nlayers 3 --batch_size 20 --bptt 35 "
    "--lr 30 --clip 0.25 --dropout 0.4 --dropouth 0.25 --dropouti 0.4 "
    "--dropoute 0.1 --wdrop 0.5 --seed 141",
}
_EPOCH_LINE = re.compile(
    r"end of epoch\s+(\d+) \| time:\s*([\d.]+)s .*valid ppl\s+([\d.]+)"
)


def parser():
    p = bench_parser(MODULE, __doc__)
    p.add_argument("--preset", choices=sorted(UPSTREAM_FLAGS), default="cpu")
    p.add_argument("--budget", type=float, default=600, help="seconds a run")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--threads", type=int, default=0, help="0: defaults")
    p.add_argument(
        "--data",
        default=os.environ.get("KERAS_RNNLM_DATA", ""),
        help="corpus root holding ptb/ (default: $KERAS_RNNLM_DATA)",
    )
    p.add_argument(
        "--reference",
        default=os.path.join(
            os.path.dirname(ROOT), "shared", "reference", "awd-lstm-lm"
        ),
    )
    p.add_argument("--set", action="append", default=[], dest="sets")
    p.add_argument("--impls", nargs="+", default=["keras", "upstream"])
    add_output_arguments(p, "upstream_epochs.jsonl")
    return p


def _log_rows(path):
    try:
        with open(path) as f:
            return list(csv.DictReader(f))
    except OSError:
        return []


def run_keras(args, work):
    """The trainer for ``args.budget`` s: [(epoch, end_s, val_ppl)]."""
    out = os.path.join(work, "run")
    cmd = [
        sys.executable,
        "-m",
        "keras_rnnlm.cli",
        "train",
        os.path.join(ROOT, "recipes", "awd_lstm_ptb.py"),
        "--preset",
        args.preset,
        "--out",
        out,
        "--no-resume",
        "--set",
        "train.verbose=0",
        *[x for s in args.sets for x in ("--set", s)],
    ]
    env = {
        **os.environ,
        **thread_env(args.threads),
        "KERAS_RNNLM_DATA": args.data,
    }
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
    seen = []
    while time.monotonic() - start < args.budget and proc.poll() is None:
        time.sleep(0.5)
        rows = _log_rows(os.path.join(out, "log.csv"))
        for row in rows[len(seen) :]:
            seen.append(
                (
                    int(row["epoch"]) + 1,
                    time.monotonic() - start,
                    float(row["val_ppl"]),
                )
            )
    proc.kill()
    proc.wait()
    return seen


def run_upstream(args, work):
    """main.py for ``args.budget`` s: [(epoch, epoch_s, val_ppl)]."""
    ref = os.path.join(work, "ref")
    shutil.copytree(args.reference, ref)
    cmd = [
        sys.executable,
        "main.py",
        "--data",
        os.path.join(args.data, "ptb"),
        "--epochs",
        "1000",
        "--save",
        os.path.join(work, "ref.pt"),
        *UPSTREAM_FLAGS[args.preset].split(),
    ]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    try:
        text = subprocess.run(
            cmd,
            cwd=ref,
            capture_output=True,
            text=True,
            timeout=args.budget,
        ).stdout
    except subprocess.TimeoutExpired as e:
        text = (e.stdout or b"").decode(errors="replace")
    return [
        (int(e), float(s), float(p)) for e, s, p in _EPOCH_LINE.findall(text)
    ]


def epoch_seconds(epochs, cumulative):
    """Seconds of each epoch (``cumulative``: end times since start)."""
    if not cumulative:
        return [s for _, s, _ in epochs]
    ends = [0.0] + [s for _, s, _ in epochs]
    return [b - a for a, b in zip(ends, ends[1:])]


def summarise(runs):
    """Median steady epoch seconds, first-epoch end, and the epochs."""
    steady = [s for r in runs for s in r["seconds"][1:]]
    return {
        "epoch_s": statistics.median(steady) if steady else None,
        "first_epoch_end_s": statistics.median(
            [r["first"] for r in runs if r["first"] is not None] or [0.0]
        ),
        "val_ppl": [p for _, _, p in runs[0]["epochs"]] if runs else [],
    }


def make_records(args, got):
    keras, ref = got.get("keras"), got.get("upstream")
    name = f"awd_lstm_ptb_{args.preset}"
    both = (
        min(len(keras["val_ppl"]), len(ref["val_ppl"]))
        if (keras and ref)
        else 0
    )
    out = []
    if keras and keras["epoch_s"] is not None:
        out.append(
            record(
                "throughput",
                f"{name}_train_epoch_s",
                "keras",
                keras["epoch_s"],
                "s/epoch",
                ref and ref["epoch_s"],
                REFERENCE_NAME,
                digits=2,
                lower_is_better=True,
            )
        )
    if keras:
        out.append(
            record(
                "latency",
                f"{name}_first_epoch_end",
                "keras",
                keras["first_epoch_end_s"],
                "s",
                digits=1,
                reference_name=None,
                epochs_in_budget=len(keras["val_ppl"]),
            )
        )
    if both:
        out.append(
            record(
                "quality",
                f"{name}_val_ppl_epoch{both}",
                "keras",
                keras["val_ppl"][both - 1],
                "ppl",
                ref["val_ppl"][both - 1],
                REFERENCE_NAME,
                digits=2,
                lower_is_better=True,
                keras_val_ppl=keras["val_ppl"],
                reference_val_ppl=ref["val_ppl"],
            )
        )
    return out


def main(argv=None):
    args = parser().parse_args(argv)
    runs = {impl: [] for impl in args.impls}
    for _ in range(args.repeats):
        for impl in args.impls:
            with tempfile.TemporaryDirectory() as work:
                epochs = (run_keras if impl == "keras" else run_upstream)(
                    args, work
                )
            runs[impl].append(
                {
                    "epochs": epochs,
                    "seconds": epoch_seconds(epochs, impl == "keras"),
                    "first": epochs[0][1]
                    if impl == "keras" and epochs
                    else None,
                }
            )
            print(impl, [(e, round(s, 1), p) for e, s, p in epochs])
    got = {impl: summarise(r) for impl, r in runs.items()}
    recs = make_records(args, got)
    for r in recs:
        print(r)
    write_records(
        args,
        recs,
        record_fields(
            MODULE,
            argv,
            threads=args.threads,
            budget_s=args.budget,
            repeats=args.repeats,
            sets=args.sets,
        ),
    )


if __name__ == "__main__":
    main()
