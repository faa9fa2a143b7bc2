"""Threads, child processes, interleaved repeats and medians.

A child is ``python -m MODULE --child JSON`` run from the repository
root: it calls the bench's ``measure(**params)`` and prints one JSON
object, with its peak RSS (:func:`child_main`). Each child gets its
thread settings from the environment (:func:`thread_env`). A command
that is not a bench child (a training run, a reference program) runs
under :func:`watch`: until a condition, its exit or a time budget, with
its peak RSS read back.
"""

import json
import os
import resource
import statistics
import subprocess
import sys
import time

from bench.harness import ROOT

_IMPORT_RSS = {}


def console_code(module="keras_rnnlm_launcher", func="main"):
    """The code a console script's installed wrapper runs for its
    ``[project.scripts]`` entry ``module:func``."""
    return f"import sys; from {module} import {func}; sys.exit({func}())"


#: The ``keras-rnnlm`` console script's code.
CLI_CODE = console_code()


def cli_command(*args):
    """``keras-rnnlm ARGS`` as a user runs it: this Python running the
    console script's entry point (:data:`CLI_CODE`; not ``python -m
    keras_rnnlm.cli``, which imports the package before the command
    line is read)."""
    return [sys.executable, "-c", CLI_CODE, *args]


# -- threads -----------------------------------------------------------------


def thread_env(threads, interop=0, base=None, **extra):
    """The environment of a child process (``base``, default this
    process's, with changes): for ``threads`` > 0,
    TensorFlow's intra-op (``threads``) and inter-op (``interop``,
    default 0: ``threads``, so "1 thread" is one thread and "2 threads"
    are TensorFlow's own choice on a 2-core machine) pools, OpenMP's,
    XLA:CPU's pool under JAX (``PJRT_NPROC``), and the values
    :func:`bench.harness.torch_side.set_torch_threads` applies; the
    package's compile cache off (``KERAS_RNNLM_COMPILE_CACHE=off``: every
    process compiles, as a first run does, whatever an earlier bench
    left on disk); Python's fault handler on (a crash prints its
    threads' stacks into the child's log); ``extra`` variables last."""
    env = dict(os.environ if base is None else base)
    env["KERAS_RNNLM_COMPILE_CACHE"] = "off"
    env["PYTHONFAULTHANDLER"] = "1"
    if threads:
        interop = interop or threads
        env.update(
            TF_NUM_INTRAOP_THREADS=str(threads),
            TF_NUM_INTEROP_THREADS=str(interop),
            OMP_NUM_THREADS=str(threads),
            PJRT_NPROC=str(threads),
            BENCH_THREADS=str(threads),
            BENCH_INTEROP_THREADS=str(interop),
        )
    env.update(extra)
    return env


def set_threads(threads, torch=None):
    """In one process: intra/inter-op threads of TensorFlow (and torch, if
    given); 0 keeps the defaults."""
    if not threads:
        return
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    if torch is not None:
        torch.set_num_threads(threads)


# -- child processes ---------------------------------------------------------


def child_command(module, params):
    """The command line of ``module``'s child with ``params``."""
    return [sys.executable, "-m", module, "--child", json.dumps(params)]


def run_child(module, params, env=None):
    """Runs ``python -m MODULE --child JSON(params)`` from the repository
    root and returns the JSON object of its last output line, with
    ``wall_s`` (the child's wall time) and ``load_average`` (1-minute load
    when it ended) added. A ``torch*`` impl's child runs with
    ``KERAS_RNNLM_MALLOC=default``: the reference keeps glibc's own
    malloc even where its child imports keras_rnnlm for a config."""
    env = env if env is not None else thread_env(0)
    if str(params.get("impl", "")).startswith("torch"):
        env = {**env, "KERAS_RNNLM_MALLOC": "default"}
    t = time.perf_counter()
    out = subprocess.run(
        child_command(module, params),
        capture_output=True,
        text=True,
        check=False,
        env=env,
        cwd=ROOT,
    )
    if out.returncode != 0:
        raise RuntimeError(
            f"{module} child {params} failed (exit code "
            f"{out.returncode}):\n{out.stderr[-4000:]}"
        )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["wall_s"] = time.perf_counter() - t
    result["load_average"] = os.getloadavg()[0]
    return result


def watch(cmd, env, done, budget, cwd=None, log=None, poll=0.5):
    """Runs ``cmd`` until ``done()`` is true (asked every ``poll`` s),
    it exits, or ``budget`` s have passed, then kills it (SIGKILL).
    Returns ``{"returncode", "killed", "wall_s", "rss_mb"}``: the peak RSS
    of the process itself, its :func:`vm_hwm_mb` read every ``poll`` s
    and before a kill (growth in a last ``poll`` s before it exits is
    missed; ``wait4``'s ``ru_maxrss``, which counts this process's peak
    too, only when it never got read). Its output goes to the file
    ``log`` (default: nowhere)."""
    out = open(log, "w") if log else subprocess.DEVNULL
    start = time.monotonic()
    peaks = []
    try:
        proc = subprocess.Popen(
            cmd, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT
        )
        killed = False
        while True:
            peaks.append(vm_hwm_mb(proc.pid))
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if done() or time.monotonic() - start > budget:
                peaks.append(vm_hwm_mb(proc.pid))
                proc.kill()
                killed = True
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(poll)
    finally:
        if log:
            out.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    peaks = [p for p in peaks if p is not None]
    return {
        "returncode": proc.returncode,
        "killed": killed,
        "wall_s": time.monotonic() - start,
        "rss_mb": max(peaks) if peaks else usage.ru_maxrss / 1024.0,
    }


def child_main(args, measure):
    """The child side of :func:`run_child`: prints ``measure(**params)``
    (a dict) as JSON with the process's peak RSS (``rss_mb``), its malloc
    state and, when :func:`note_import_rss` ran, the RSS after the
    framework import. A child of any implementation but ``torch`` sets
    glibc's allocator as the ``keras-rnnlm`` command and the recipes do
    (:func:`keras_rnnlm._malloc.tune_malloc`), so it measures what a user
    runs; a PyTorch child keeps glibc's own settings."""
    params = json.loads(args.child)
    if params.get("impl") != "torch":
        from keras_rnnlm._malloc import tune_malloc  # as the CLI, on use

        tune_malloc()
    result = measure(**params)
    result.setdefault("rss_mb", peak_rss_mb())
    result.setdefault("malloc", malloc_state())
    if "mb" in _IMPORT_RSS:
        result.setdefault("import_rss_mb", _IMPORT_RSS["mb"])
    print(json.dumps(result), flush=True)


def interleave(keys, repeats, measure, report=None, alternate=False):
    """``{key: [measure(key) per repeat]}``, the repeats interleaved (all
    keys once, then all again, ...) so slow drifts of the machine hit every
    key alike (``alternate``: every other repeat in reverse order, so no
    key always runs first); ``report(repeat, key, result)`` after each."""
    samples = {key: [] for key in keys}
    keys = list(keys)
    for rep in range(repeats):
        for key in keys[::-1] if alternate and rep % 2 else keys:
            result = measure(key)
            samples[key].append(result)
            if report is not None:
                report(rep, key, result)
    return samples


def run_children(module, impls, repeats, env=None, report=None, **params):
    """:func:`interleave` of :func:`run_child` over ``impls``: each child
    gets ``{"impl": impl, **params}``."""

    def measure(impl):
        return run_child(module, {"impl": impl, **params}, env)

    return interleave(impls, repeats, measure, report)


def medians(samples, fields):
    """``{key: {field: median over the key's results}}``."""
    return {
        key: {f: statistics.median(r[f] for r in runs) for f in fields}
        for key, runs in samples.items()
    }


def vs(m, ref, label, fields=("train", "eval")):
    """``"  (1.20x / 0.82x LABEL)"``: ``m``'s fields over ``ref``'s."""
    ratios = " / ".join(f"{m[f] / ref[f]:.2f}x" for f in fields)
    return f"  ({ratios} {label})"


# -- memory and malloc -------------------------------------------------------


def peak_rss_mb():
    """Peak resident memory of this process so far, MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def note_import_rss():
    """Remembers the peak RSS right after the framework import (TensorFlow's
    libraries alone hold ~700 MB resident, torch's ~220 MB): the rest of
    the peak is what the model and its work cost."""
    _IMPORT_RSS["mb"] = peak_rss_mb()


#: What each side of a comparison imports before its work, run alone
#: for its framework's baseline (:func:`import_rss_mb`); upstream's own
#: modules add nothing measurable to ``import torch``.
KERAS_IMPORT = "import keras_rnnlm, tensorflow"
TORCH_IMPORT = "import torch"
_PRINT_PEAK = (
    "\nwith open('/proc/self/status') as f:\n"
    "    print([x.split()[1] for x in f if x.startswith('VmHWM:')][0])"
)


def import_rss_mb(code, env):
    """The peak RSS (MB) of a fresh ``python -c CODE`` process under
    ``env``: its own VmHWM, which it prints as it ends."""
    out = subprocess.run(
        [sys.executable, "-c", code + _PRINT_PEAK],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout.split()[-1]) / 1024.0


def growth_mb(peaks, imports):
    """The median of each run's peak RSS less its side's import peak
    (:func:`import_rss_mb`); runs without either left out (None when none
    is left)."""
    values = [p - i for p, i in zip(peaks, imports) if None not in (p, i)]
    return statistics.median(values) if values else None


def malloc_state():
    """How this process's glibc malloc was set: keras_rnnlm's tuning
    (``tuned: arena_max=1``, ``default`` when turned off,
    ``unsupported``) once the package is imported
    (:mod:`keras_rnnlm._malloc`), else ``glibc default``."""
    tuning = sys.modules.get("keras_rnnlm._malloc")
    return (tuning and tuning.state and tuning.describe()) or "glibc default"


def vm_hwm_mb(pid="self"):
    """The peak resident memory of process ``pid``'s current program,
    MB: ``VmHWM`` of ``/proc/PID/status`` (None when the process is gone,
    a zombie, or not on Linux). Unlike ``getrusage``/``wait4``'s
    ``ru_maxrss`` it does not count the process that started it: Linux
    carries the starting process's peak into a child's ``ru_maxrss``
    across ``exec`` (a fork's copy, or a vfork's shared memory, is the
    old program), so a child of a bench that imported TensorFlow reads
    at least the bench's ~700 MB there."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None
