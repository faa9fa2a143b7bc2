"""Records: one JSON object a figure, appended to ``bench/results``.

A record holds ``kind`` (``throughput``, ``latency``, ``memory``,
``params``, ``quality``, ``analysis``, ``reliability``, ``model``),
``name`` (what was measured), ``model`` (which implementation),
``value`` and ``unit``, and, for a comparison, ``reference``,
``reference_name`` and ``ratio`` (value / reference: both measured in
the same run on the same machine; a comparison with upstream code names
it, e.g. ``salesforce/awd-lstm-lm``). ``name`` says the shape (the preset:
``cpu``, ``paper``, ``small``, ...) and ``train`` or ``eval``.
:func:`record_fields` adds what every record of a run shares: the
machine (``device``, ``cpu_model``, ``isa``, ``isa_cap`` when capped,
``cores``: :mod:`bench.harness.machine`), the ``threads`` setting (and
``thread_env``, the thread variables set), the library ``versions``, the
date, the command, the git commit and the load.
"""

import datetime
import json
import os
import sys

from bench.harness.machine import THREAD_VARIABLES
from bench.harness.machine import cpu_facts
from bench.harness.machine import git_commit
from bench.harness.machine import idle_facts
from bench.harness.machine import machine
from bench.harness.machine import thread_settings
from bench.harness.machine import versions


def record(
    kind,
    name,
    model,
    value,
    unit,
    reference=None,
    reference_name=None,
    digits=1,
    ratio_digits=3,
    **extra,
):
    """One record: ``value`` and ``reference`` rounded to ``digits``
    (None: as given), ``ratio`` = value / reference to ``ratio_digits``
    (None: no ratio), ``extra`` fields after."""

    def rnd(v):
        return v if v is None or digits is None else round(v, digits)

    ratio = None
    if reference and ratio_digits is not None:
        ratio = round(value / reference, ratio_digits)
    return {
        "kind": kind,
        "name": name,
        "model": model,
        "value": rnd(value),
        "unit": unit,
        "reference": rnd(reference) if reference else None,
        "reference_name": reference_name,
        "ratio": ratio,
        **extra,
    }


def command_line(module, argv=None):
    """``python -m MODULE ARGS`` as typed (``argv``: default sys.argv)."""
    args = sys.argv[1:] if argv is None else list(argv)
    return f"python -m {module} {' '.join(args)}".strip()


def record_fields(module, argv=None, device=None, environ=None, **extra):
    """The fields every record of a run shares: ``device`` (default: this
    machine's CPU class), the CPU facts (``cpu_model``, ``isa``,
    ``isa_cap`` when capped, ``cores``: the host's on a GPU too; the cap
    and the thread variables of ``environ``, the environment the measured
    processes ran with, default this process's),
    ``cpu_idle`` (how idle CPUs wait, where Linux says:
    :func:`~bench.harness.machine.idle_facts`),
    ``threads`` (unless ``extra`` gives it: ``--threads N`` of the
    command, else the environment's, else ``default``), ``thread_env``
    (the thread variables set, if any), ``versions`` (TensorFlow, Keras,
    JAX, torch: those installed), ``date``, ``command`` (``module`` as
    typed), the ``git_commit``, the 1-minute ``load_average``, then
    ``extra``."""
    args = sys.argv[1:] if argv is None else list(argv)
    environ = os.environ if environ is None else environ
    env = {k: environ[k] for k in THREAD_VARIABLES if k in environ}
    idle = idle_facts()
    return {
        "device": device or machine(environ),
        **cpu_facts(environ),
        **({"cpu_idle": idle} if idle else {}),
        "threads": thread_settings(args, environ),
        **({"thread_env": env} if env else {}),
        "versions": versions(),
        "date": datetime.date.today().isoformat(),
        "command": command_line(module, argv),
        "git_commit": git_commit(),
        "load_average": round(os.getloadavg()[0], 2),
        **extra,
    }


def write_records(args, records, fields=None, path=None):
    """Appends ``records`` (each completed by the ``fields`` it lacks) to
    ``path`` (default ``args.out``), one JSON object a line; nothing with
    ``args.no_record``."""
    if args.no_record:
        return
    path = path or args.out
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "a") as f:
        for rec in records:
            rest = {k: v for k, v in (fields or {}).items() if k not in rec}
            f.write(json.dumps({**rec, **rest}) + "\n")
    print(f"appended {len(records)} record(s) to {path}")


def malloc_fields(runs, ref_runs=None):
    """``malloc`` (and ``reference_malloc``) of a record: how the
    processes of its runs had glibc's malloc set (``a / b`` if they
    differ; see :func:`bench.harness.processes.malloc_state`)."""

    def states(rs):
        return " / ".join(sorted({r.get("malloc", "?") for r in rs}))

    out = {"malloc": states(runs)}
    if ref_runs:
        out["reference_malloc"] = states(ref_runs)
    return out


def rss_fields(m, ref=None):
    """A memory record's split of the peak RSS (``m["rss_mb"]``): the
    framework's after its import, the rest (the model and its work), and
    the reference's rest."""
    out = {
        "import_rss_mb": round(m["import_rss_mb"], 1),
        "model_rss_mb": round(m["rss_mb"] - m["import_rss_mb"], 1),
    }
    if ref:
        out["reference_model_rss_mb"] = round(
            ref["rss_mb"] - ref["import_rss_mb"], 1
        )
    return out
