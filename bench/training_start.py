"""Does training start reliably? A recipe's whole start-up, many times.

Each attempt is a fresh process of ``RECIPE --preset PRESET`` (what a user
runs) in a new temporary run directory, on a truncated corpus
(``data.max_tokens``: a few training batches, then the validation and test
passes of the recipe), with TensorFlow's intra-op pool at ``--threads``
(0: its default) and Python's ``faulthandler`` on, so a crash leaves the
Python stack of every thread in the kept log (``--logs``). An attempt ends
by itself, or is killed after ``--timeout`` seconds (counted as a hang).
The process exits 1 unless every attempt succeeded.

    python -m bench.training_start --attempts 40 --threads 2
    python -m bench.training_start --attempts 40 --threads 2 \\
        --set train.jit_compile=false             # without XLA
    python -m bench.training_start --recipe recipes/zaremba_ptb.py \\
        --preset small --attempts 1 --no-record   # a quick check

One record per invocation (kind ``reliability``) goes to
``bench/results/training_start.jsonl``: attempts, successes, crashes by
signal and exit status, hangs, and the median wall time of a successful
attempt.
"""

import collections
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from bench.harness import ROOT
from bench.harness.options import add_output_arguments
from bench.harness.options import add_overrides_argument
from bench.harness.options import bench_parser
from bench.harness.records import record
from bench.harness.records import record_fields
from bench.harness.records import write_records

MODULE = "bench.training_start"


def attempt(cmd, env, timeout, log_path):
    """One start-up: ``(status, seconds)``; status is ``ok``, ``hang``,
    ``signal SIGNAME`` or ``exit N``."""
    start = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            cmd, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return "hang", time.perf_counter() - start
    seconds = time.perf_counter() - start
    if rc == 0:
        return "ok", seconds
    if rc < 0:
        return f"signal {signal.Signals(-rc).name}", seconds
    return f"exit {rc}", seconds


def parser():
    p = bench_parser(MODULE, __doc__)
    p.add_argument("--recipe", default="recipes/awd_lstm_ptb.py")
    p.add_argument("--preset", default="cpu")
    p.add_argument("--attempts", type=int, default=20)
    p.add_argument(
        "--threads",
        type=int,
        default=2,
        help="TensorFlow intra-op threads (0: its default; default: "
        "%(default)s); the inter-op pool keeps TensorFlow's default "
        "unless --interop is given",
    )
    p.add_argument("--interop", type=int, default=0)
    p.add_argument(
        "--max-tokens",
        type=int,
        default=20 * 35 * 12,
        help="data.max_tokens of every attempt (default: %(default)s, "
        "12 training batches of the AWD-LSTM cpu preset)",
    )
    add_overrides_argument(p, "more config overrides of every attempt")
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument(
        "--logs",
        default=os.path.join(ROOT, "runs", "training_start"),
        help="where the logs of failed attempts are kept",
    )
    p.add_argument("--note", default="")
    add_output_arguments(p, "training_start.jsonl")
    return p


def attempt_command(args, out):
    """The recipe's command line of one attempt, writing to ``out``."""
    cmd = [sys.executable, args.recipe, "--preset", args.preset]
    cmd += ["--out", out, "--no-resume"]
    for item in [
        f"data.max_tokens={args.max_tokens}",
        "train.epochs=1",
        "train.tensorboard=false",
        "train.verbose=0",
        *args.overrides,
    ]:
        cmd += ["--set", item]
    return cmd


def attempts(args, env):
    """Runs every attempt: ``(outcome counts, seconds of the successful
    ones, logs kept of the failed ones)``."""
    counts, ok_seconds, kept = collections.Counter(), [], []
    for i in range(args.attempts):
        with tempfile.TemporaryDirectory() as tmp:
            log_path = os.path.join(tmp, "log.txt")
            cmd = attempt_command(args, os.path.join(tmp, "run"))
            status, seconds = attempt(cmd, env, args.timeout, log_path)
            counts[status] += 1
            if status == "ok":
                ok_seconds.append(seconds)
            else:
                keep = os.path.join(args.logs, f"attempt_{i}_{os.getpid()}.log")
                os.replace(log_path, keep)
                kept.append(keep)
        print(f"attempt {i + 1}/{args.attempts}: {status} ({seconds:.1f} s)")
    return counts, ok_seconds, kept


def main(argv=None):
    args = parser().parse_args(argv)
    env = dict(os.environ, PYTHONFAULTHANDLER="1", TF_CPP_MIN_LOG_LEVEL="0")
    if args.threads:
        env["TF_NUM_INTRAOP_THREADS"] = str(args.threads)
    if args.interop:
        env["TF_NUM_INTEROP_THREADS"] = str(args.interop)
    os.makedirs(args.logs, exist_ok=True)
    fields = record_fields(MODULE, argv)
    load_start = os.getloadavg()
    counts, ok_seconds, kept = attempts(args, env)
    summary = dict(sorted(counts.items()))
    print(f"{summary}; logs of failures: {kept or 'none'}")
    median_s = statistics.median(ok_seconds) if ok_seconds else None
    rec = record(
        "reliability",
        "training_startup",
        f"{os.path.basename(args.recipe)} --preset {args.preset}",
        counts["ok"],
        "successful starts",
        reference=args.attempts,
        reference_name="attempts",
        digits=None,
        outcomes=summary,
        threads=args.threads or "default",
        interop=args.interop or "default",
        overrides=args.overrides,
        max_tokens=args.max_tokens,
        median_ok_s=round(median_s, 1) if median_s else None,
        failure_logs=kept,
        load_start=[round(v, 2) for v in load_start],
        load_end=[round(v, 2) for v in os.getloadavg()],
        note=args.note,
    )
    write_records(args, [rec], fields)
    return 0 if counts["ok"] == args.attempts else 1


if __name__ == "__main__":
    raise SystemExit(main())
