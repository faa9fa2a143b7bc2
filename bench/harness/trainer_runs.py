"""The package's trainer run as a user runs it, and tokens/s after a
warm-up.

:func:`trainer_command` is ``keras-rnnlm train RECIPE --preset P`` (the
console script's entry, :func:`~bench.harness.processes.cli_command`;
variable BPTT where the preset has it, every callback,
checkpoints, validation) with only ``train.verbose=0`` and
``train.timing_log=true`` set: the trainer then writes when each batch
ended (after its loss was read back) and its tokens to ``timing.csv``.
:func:`run_trainer` runs it under :func:`~bench.harness.processes.watch`
until its first epoch has the batches wanted (then kills it), it exits,
or a budget runs out, and reads its rows back. The rate rule, the same
for every side of a comparison: :func:`span_rate` (the tokens of batches
W+1 .. W+N over the time from the end of batch W to the end of batch
W+N), :func:`batch_rate` (and the timed batches of a window length no
batch before them had, which the trainer compiles: the rate without
them) and :func:`keras_rate` (a trainer run's). :func:`child_env` is the
environment of any side's process: the ISA knobs of ``--isa``, the
thread settings of ``--threads``, the corpus root, a Keras backend.

Reading ``timing.csv`` imports the package (and so TensorFlow): only the
parent process that watches a trainer calls :func:`run_trainer`; a
module that a PyTorch child imports may import this one.
"""

import csv
import json
import os
import time

from bench.harness.isa import ISA_VARIABLES
from bench.harness.isa import isa_env
from bench.harness.processes import cli_command
from bench.harness.processes import thread_env
from bench.harness.processes import watch
from bench.harness.records import record_fields
from bench.harness.records import write_records

#: The variables of the children's ISA knobs a record carries.
ISA_ENV = (*ISA_VARIABLES, "XLA_FLAGS")


def add_run_arguments(p, root):
    """The options every trainer-beside-a-reference bench shares:
    ``--repeats``, ``--threads``, ``--data`` (the corpus root) and
    ``--reference`` (salesforce/awd-lstm-lm with its timing flags, beside
    the repository at ``root``)."""
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
            os.path.dirname(root), "shared", "reference", "awd-lstm-lm"
        ),
        help="salesforce/awd-lstm-lm with its timing flags (upstream)",
    )


def report_records(module, argv, env, args, recs):
    """Prints ``recs`` (a JSON line each) and appends them with
    :func:`run_fields` (the load when they are written)."""
    for r in recs:
        print(json.dumps(r))
    write_records(args, recs, run_fields(module, argv, env, args))


def run_fields(module, argv, env, args):
    """The common record fields of a trainer bench's run: the command,
    the children's environment ``env`` and its ISA knobs, the threads,
    repeats, budget and the trainer's ``--set`` overrides."""
    return record_fields(
        module,
        argv,
        environ=env,
        isa_env={k: env[k] for k in ISA_ENV if k in env},
        threads=args.threads or "default",
        repeats=args.repeats,
        budget_s=args.budget,
        sets=args.sets,
    )


def child_env(threads, isa, data, backend=None, environ=None):
    """The environment of a child: ``environ`` (default this process's)
    with the ISA knobs of ``isa`` (:func:`~bench.harness.isa.isa_env`),
    the thread settings of ``threads``
    (:func:`~bench.harness.processes.thread_env`), the corpus root and,
    for the trainer, ``KERAS_BACKEND``."""
    env = thread_env(threads, base=isa_env(isa, environ), KERAS_RNNLM_DATA=data)
    if backend:
        env["KERAS_BACKEND"] = backend
    return env


def trainer_command(recipe, preset, out, sets=()):
    """The trainer's command line for ``recipe``'s ``preset``, as a user
    runs it, into the run directory ``out`` (started over): only
    ``train.verbose=0`` and ``train.timing_log=true`` set, then the
    ``--set`` overrides ``sets``."""
    return cli_command(
        "train",
        recipe,
        "--preset",
        preset,
        "--out",
        out,
        "--no-resume",
        "--set",
        "train.verbose=0",
        "--set",
        "train.timing_log=true",
        *[x for s in sets for x in ("--set", s)],
    )


def first_epoch_batches(rows):
    """The ``batch`` rows of the first epoch of a ``timing.csv``."""
    return [r for r in rows if r["event"] == "batch" and r["epoch"] == 0]


def run_trainer(cmd, env, want, budget, work, log="keras.log"):
    """Runs the trainer command ``cmd`` (its ``--out`` in ``work``/run)
    until its first epoch has ``want`` batches (0: until it exits), it
    exits, or ``budget`` s have passed. Returns :func:`watch`'s fields
    with ``start`` (Unix time before the start), ``rows`` (its
    ``timing.csv``), ``epochs`` (its ``log.csv`` rows) and ``log``
    (its output's file, in ``work``)."""
    from keras_rnnlm.callbacks.timing import read_timing_log
    from keras_rnnlm.runs import LOG_FILE
    from keras_rnnlm.runs import TIMING_FILE

    out = cmd[cmd.index("--out") + 1]
    timing = os.path.join(out, TIMING_FILE)

    def done():
        if not want:
            return False
        return len(first_epoch_batches(read_timing_log(timing))) >= want

    start = time.time()
    log = os.path.join(work, log)
    proc = watch(cmd, env, done, budget, log=log)
    run = {**proc, "start": start, "rows": read_timing_log(timing)}
    run["epochs"] = _log_rows(os.path.join(out, LOG_FILE))
    run["log"] = log
    return checked(run)


def _log_rows(path):
    try:
        with open(path) as f:
            return list(csv.DictReader(f))
    except OSError:
        return []


def ran(run):
    """Whether a run ran: ended well, or was stopped by the bench."""
    return run["returncode"] == 0 or run["killed"]


def checked(run):
    """``run``, with the tail of its log (``run["log"]``) printed when it
    failed."""
    if not ran(run):
        with open(run["log"]) as f:
            tail = f.read()[-3000:]
        print(f"run failed (exit {run['returncode']}):\n{tail}")
    return run


# -- the figures ---------------------------------------------------------------


def span_rate(times, tokens, warmup, batches):
    """``(tokens/s, tokens, seconds)`` of batches ``warmup`` + 1 ..
    ``warmup + batches`` (1-based) of end times ``times`` and ``tokens``:
    their tokens over the time from the end of batch ``warmup`` to the
    end of the last; None when fewer batches ended."""
    if warmup < 1 or len(times) < warmup + batches:
        return None
    seconds = times[warmup + batches - 1] - times[warmup - 1]
    n = sum(tokens[warmup : warmup + batches])
    return n / seconds, n, seconds


def batch_rate(times, tokens, warmup, batches):
    """:func:`span_rate` as a dict (``tok_s``, ``tokens``), with the
    timed batches of a window length (tokens) no batch before them had
    (``new_length_batches``: the trainer compiles its step for each) and
    the rate without them (``tok_s_seen_lengths``; None when every timed
    batch is new); None when fewer batches ended."""
    times, tokens = times[: warmup + batches], tokens[: warmup + batches]
    got = span_rate(times, tokens, warmup, batches)
    if got is None:
        return None
    rate, n, seconds = got
    timed = range(warmup, warmup + batches)
    new = [k for k in timed if tokens[k] not in tokens[:k]]
    new_s = sum(times[k] - times[k - 1] for k in new)
    new_tokens = sum(tokens[k] for k in new)
    seen = (n - new_tokens) / (seconds - new_s) if len(new) < batches else None
    return {
        "tok_s": rate,
        "tokens": n,
        "new_length_batches": len(new),
        "tok_s_seen_lengths": seen,
    }


def keras_rate(run, warmup, batches):
    """The trainer run's :func:`batch_rate` over its first epoch, the
    end of its first batch from the start (``first_batch_s``) and its
    peak RSS; None when it did not get there."""
    rows = first_epoch_batches(run["rows"])
    times = [r["time"] for r in rows]
    got = batch_rate(times, [r["tokens"] for r in rows], warmup, batches)
    if got is None:
        return None
    return {
        **got,
        "first_batch_s": times[0] - run["start"],
        "rss_mb": run["rss_mb"],
    }
