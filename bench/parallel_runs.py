"""Run several recipe runs side by side on one machine (the lent GPU),
watch them, and pack their logs.

A GPU lease is short (minutes) and a one-layer LSTM with batch 20 keeps
an H100 mostly idle, so the runs of a table are started together, each
in its own process session so that they outlive the command that started
them (the device tool keeps such processes while the machine is held):

    python -m bench.parallel_runs start --root /tmp/t2 --jobs JOBS
    python -m bench.parallel_runs watch --root /tmp/t2 --seconds 540
    python -m bench.parallel_runs kill --root /tmp/t2 [NAME ...]
    python -m bench.parallel_runs pack --root /tmp/t2 --out $OUT/runs.tgz

JOBS has one run a line, ``NAME<space>COMMAND``; each run's output goes
to ``ROOT/NAME/stdout.txt``, its exit status to ``ROOT/NAME/rc``, and
its recipe writes its run directory where COMMAND's ``--out`` says
(``ROOT/NAME/run`` by convention). JAX is told not to take most of the
GPU's memory for each process (``XLA_PYTHON_CLIENT_PREALLOCATE``).
"""

import csv
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from bench.harness.options import bench_parser

MODULE = "bench.parallel_runs"

#: What ``pack`` keeps of each run (the weights stay on the machine).
PACKED = (
    "stdout.txt",
    "rc",
    "run/log.csv",
    "run/results.json",
    "run/config.json",
    "run/run.json",
    "run/best.json",
    "test.txt",
)


def read_jobs(path):
    jobs = []
    for line in Path(path).read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, command = line.split(None, 1)
            jobs.append((name, command))
    return jobs


def start(root, jobs):
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
    for name, command in jobs:
        run_dir = root / name
        run_dir.mkdir(parents=True, exist_ok=True)
        out, rc = run_dir.resolve() / "stdout.txt", run_dir.resolve() / "rc"
        shell = f"( {command} ) > {out} 2>&1; echo $? > {rc}"
        proc = subprocess.Popen(
            ["bash", "-c", shell],
            env=env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        (run_dir / "pid").write_text(str(proc.pid))
        print(f"started {name} (pid {proc.pid}): {command}", flush=True)


def _alive(run_dir):
    """``running``, or ``stopped`` for a run killed before it wrote rc."""
    try:
        os.killpg(int((run_dir / "pid").read_text()), 0)
    except (ProcessLookupError, FileNotFoundError):
        return "stopped"
    return "running"


def status(run_dir):
    log = run_dir / "run" / "log.csv"
    rows = []
    if log.exists():
        with open(log) as f:
            rows = list(csv.DictReader(f))
    rc = run_dir / "rc"
    state = f"rc {rc.read_text().strip()}" if rc.exists() else _alive(run_dir)
    last = rows[-1] if rows else {}
    val = last.get("val_ppl")
    tail = ""
    out = run_dir / "stdout.txt"
    if out.exists():
        lines = [
            x
            for x in out.read_text(errors="replace").splitlines()
            if " - " in x and "/step" in x
        ]
        tail = lines[-1][:60] if lines else ""
    val_text = f"{float(val):.2f}" if val else "-"
    return (
        f"{run_dir.name}: {state}, epochs {len(rows)}, "
        f"val ppl {val_text}; {tail}"
    )


def watch(root, seconds, every, report):
    """Wait until every run has ended or ``seconds`` have passed, printing
    every run's status each ``report`` seconds and at the end."""
    end = time.time() + seconds
    reported = time.time()
    while True:
        dirs = sorted(p for p in root.iterdir() if p.is_dir())
        done = all(_alive(d) == "stopped" for d in dirs)
        last = done or time.time() + every > end
        if last or time.time() - reported >= report:
            reported = time.time()
            print(time.strftime("%H:%M:%S"), flush=True)
            for d in dirs:
                print(status(d), flush=True)
        if last:
            return
        time.sleep(every)


def kill(root, names):
    """SIGTERM to the named runs' process groups (no names: every run)."""
    names = names or sorted(p.name for p in root.iterdir() if p.is_dir())
    for name in names:
        pid = int((root / name / "pid").read_text())
        try:
            os.killpg(pid, signal.SIGTERM)
            print(f"killed {name}")
        except ProcessLookupError:
            print(f"{name} had ended")


def pack(root, out):
    with tarfile.open(out, "w:gz") as tar:
        for d in sorted(p for p in root.iterdir() if p.is_dir()):
            for rel in PACKED:
                if (d / rel).exists():
                    tar.add(d / rel, arcname=f"{d.name}/{rel}")
    print(f"packed {out} ({Path(out).stat().st_size} bytes)")


def main(argv=None):
    parser = bench_parser(MODULE, __doc__)
    parser.add_argument("action", choices=["start", "watch", "kill", "pack"])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--jobs")
    parser.add_argument("--seconds", type=float, default=540)
    parser.add_argument("--every", type=float, default=20)
    parser.add_argument("--report", type=float, default=120)
    parser.add_argument("--out")
    args = parser.parse_intermixed_args(argv)
    if args.action == "start":
        start(args.root, read_jobs(args.jobs))
    elif args.action == "watch":
        watch(args.root, args.seconds, args.every, args.report)
    elif args.action == "kill":
        kill(args.root, args.names)
    else:
        pack(args.root, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
