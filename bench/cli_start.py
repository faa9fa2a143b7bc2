"""How long the command line takes to answer ``--help``, ``import
keras_rnnlm``, and a short command that runs (``keras-rnnlm score`` of one
sentence): wall time of fresh processes, from start to exit, the median
of ``--repeats``.

    python -m bench.cli_start                      # this checkout
    python -m bench.cli_start --baseline c5d8e1d   # and a commit, interleaved

``keras-rnnlm score RUN FILE`` scores one sentence with an untrained run
of ``recipes/awd_lstm_ptb.py``'s ``cpu`` preset (written once, into a
temporary folder, by this checkout; it needs the PTB corpus under
``KERAS_RNNLM_DATA``, and is left out without it): TensorFlow's import,
the run's load, one compiled call and the process's shut-down.

Each command runs in a fresh Python process with the checkout's ``src``
first on ``PYTHONPATH``. ``keras-rnnlm ARGS`` is run as its console script
runs it: the ``[project.scripts]`` entry of that checkout's
``pyproject.toml`` (``from MODULE import FUNC; sys.exit(FUNC())``), so a
commit is measured with its own entry point. ``--baseline COMMIT``
extracts that commit's ``src`` and ``pyproject.toml`` (``git archive``)
into a temporary folder and runs every command there too, alternating
with this checkout in each repeat; the records then carry the commit's
median as their ``reference``.

One record per command goes to ``bench/results/startup.jsonl`` (kind
``latency``, seconds) with the fields every bench record gives
(:func:`bench.harness.records.record_fields`: the CPU, its ISA and cap,
threads, library versions, commit), read after the timings.
"""

import argparse
import io
import json
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

from bench.harness.processes import console_code

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "results", "startup.jsonl")

#: (record name, command as typed, how to run it)
COMMANDS = (
    ("cli_help", "keras-rnnlm --help", ("cli", "--help")),
    ("cli_train_help", "keras-rnnlm train --help", ("cli", "train", "--help")),
    ("cli_score_help", "keras-rnnlm score --help", ("cli", "score", "--help")),
    ("import_keras_rnnlm", 'python -c "import keras_rnnlm"', ("import",)),
    (
        "cli_score_sentence",
        "keras-rnnlm score RUN FILE (one sentence)",
        ("cli", "score", "{run}", "{text}"),
    ),
)
#: The sentence ``keras-rnnlm score`` scores.
SENTENCE = "the company said it expects to report a loss for the quarter\n"
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
    "XLA_FLAGS",
    "KERAS_BACKEND",
    "KERAS_RNNLM_MALLOC",
    "TF_CPP_MIN_LOG_LEVEL",
)


def git(*args):
    return subprocess.run(
        ["git", "-C", ROOT, *args], capture_output=True, check=True
    ).stdout


def extract(commit, folder):
    """``commit``'s ``src`` and ``pyproject.toml`` under ``folder``."""
    data = git("archive", "--format=tar", commit, "src", "pyproject.toml")
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(folder, filter="data")
    return folder


def entry_point(tree):
    """``(module, function)`` of the ``keras-rnnlm`` console script in
    ``tree``'s ``pyproject.toml``."""
    with open(os.path.join(tree, "pyproject.toml")) as f:
        text = f.read()
    m = re.search(r'^keras-rnnlm\s*=\s*"([\w.]+):(\w+)"', text, re.M)
    if not m:
        raise SystemExit(f"no keras-rnnlm script in {tree}/pyproject.toml")
    return m.groups()


def argv_of(how, tree, files=None):
    """The ``python`` arguments of a command (see :data:`COMMANDS`), its
    ``{run}`` and ``{text}`` from ``files``."""
    if how[0] == "import":
        return ["-c", "import keras_rnnlm"]
    code = console_code(*entry_point(tree))
    args = [a.format(**files) if files else a for a in how[1:]]
    return ["-c", code, *args]


def prepare_files(folder):
    """``{"run": RUN, "text": FILE}`` for the scoring command (an
    untrained ``cpu`` run and one sentence), or ``None`` without the PTB
    corpus."""
    data = os.environ.get("KERAS_RNNLM_DATA", "")
    if not os.path.isdir(os.path.join(data, "ptb")):
        return None
    run = os.path.join(folder, "run")
    recipe = os.path.join(ROOT, "recipes", "awd_lstm_ptb.py")
    code = (
        "from bench.harness.run_dirs import write_untrained_run; "
        f"write_untrained_run({recipe!r}, 'cpu', {run!r})"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
    text = os.path.join(folder, "sentence.txt")
    with open(text, "w") as f:
        f.write(SENTENCE)
    return {"run": run, "text": text}


def commands(files):
    """:data:`COMMANDS`, those that need ``files`` left out without
    them."""
    return [c for c in COMMANDS if files or not any("{" in a for a in c[2])]


def time_once(argv, tree):
    env = dict(os.environ, PYTHONPATH=os.path.join(tree, "src"))
    start = time.perf_counter()
    p = subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, env=env
    )
    seconds = time.perf_counter() - start
    if p.returncode != 0:
        raise SystemExit(
            f"{argv} in {tree} exited {p.returncode}:\n{p.stderr[-2000:]}"
        )
    if "--help" in argv and "usage:" not in p.stdout:
        raise SystemExit(f"{argv} in {tree} printed no usage:\n{p.stdout}")
    return seconds


def measure(trees, repeats, files=None):
    """``{(tree, name): [seconds, ...]}``, the trees alternating within
    each repeat (one warm-up pass of every command first, untimed)."""
    samples = {}
    for rep in range(repeats + 1):
        for name, _, how in commands(files):
            for tree in trees:
                s = time_once(argv_of(how, tree, files), tree)
                if rep:
                    samples.setdefault((tree, name), []).append(round(s, 3))
    return samples


def record(name, typed, how, samples, trees, baseline):
    """One command's record (without the fields every record shares)."""
    now = samples[(ROOT, name)]
    rec = {
        "kind": "latency",
        "name": name,
        "model": typed,
        "value": round(statistics.median(now), 3),
        "unit": "s",
        "reference": None,
        "reference_name": None,
        "ratio": None,
        "samples": now,
    }
    if baseline:
        before = samples[(trees[1], name)]
        rec["reference"] = round(statistics.median(before), 3)
        rec["reference_name"] = f"commit {baseline}"
        rec["ratio"] = round(rec["value"] / rec["reference"], 3)
        rec["reference_samples"] = before
    if how[0] == "cli":
        code = argv_of(how, ROOT)[1]
        rec["run_as"] = f"the console script's code: {code}"
    return rec


def shared_fields(args, argv, load_start, load_end):
    """The fields every bench record gives (the machine, threads,
    libraries, commit: :func:`bench.harness.records.record_fields`), with
    the thread variables as the timed processes saw them and the load."""
    # Imported after the timings: bench.harness loads keras_rnnlm (and
    # TensorFlow) for the CPU facts, which the timed children must not
    # share a machine with.
    from bench.harness.records import record_fields

    fields = record_fields(
        "bench.cli_start",
        argv,
        threads="default",
        interop="default",
        repeats=args.repeats,
        load_start=load_start,
        load_end=load_end,
        note=args.note,
        load_average=load_start[0],
    )
    fields["thread_env"] = {v: os.environ.get(v) for v in THREAD_VARIABLES}
    return fields


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--baseline", metavar="COMMIT", help="also time this commit")
    p.add_argument("--note", default="", help="recorded as is")
    p.add_argument("--out", default=OUT)
    p.add_argument("--no-record", action="store_true")
    args = p.parse_args(argv)

    load_start = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory() as tmp:
        trees = [ROOT]
        if args.baseline:
            trees.append(extract(args.baseline, os.path.join(tmp, "base")))
        files = prepare_files(tmp)
        samples = measure(trees, args.repeats, files)
    load_end = [round(x, 2) for x in os.getloadavg()]

    shared = shared_fields(args, argv, load_start, load_end)
    records = []
    for name, typed, how in commands(files):
        rec = record(name, typed, how, samples, trees, args.baseline)
        records.append({**rec, **shared})
        line = f"{typed:42s} {rec['value']:6.3f} s"
        if args.baseline:
            line += f"  ({args.baseline}: {rec['reference']:.3f} s)"
        print(line)
    if args.no_record:
        return 0
    with open(args.out, "a") as f:
        for rec in records:
            f.write(json.dumps(rec) + "\n")
    print(f"appended {len(records)} records to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
