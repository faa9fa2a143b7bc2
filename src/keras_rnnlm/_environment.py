"""The software and machine a run's numbers come from.

A trained model's perplexity depends on more than its config and seed:
the library versions (a Keras or TensorFlow release can change a kernel)
and the CPU (oneDNN and XLA pick their kernels by the CPU's vector
instructions, which changes the order of floating-point sums: the
README quickstart's valid perplexity moves by 1.5% between oneDNN's
AVX-512 and AVX2 kernels on one machine, bench/results/quickstart.jsonl).
:func:`environment` names all of it; ``run.json`` and ``results.json``
carry it beside the figures.
"""

import importlib.metadata
import os
import platform
import subprocess
import sys

import keras

from keras_rnnlm._version import PACKAGE_DIR
from keras_rnnlm._version import __version__

#: The CPU flags that decide which kernels oneDNN, Eigen and XLA run (x86
#: vector extensions, ARM's), in this order in :func:`cpu`'s ``isa``.
ISA_FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "asimd",
    "sve",
    "sve2",
)

#: Environment variables that choose kernels, backends or threads (and
#: so can change a run's figures); :func:`environment` records those set.
NUMERIC_ENV = (
    "KERAS_BACKEND",
    "TF_ENABLE_ONEDNN_OPTS",
    "ONEDNN_MAX_CPU_ISA",
    "DNNL_MAX_CPU_ISA",
    "XLA_FLAGS",
    "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
    "OMP_NUM_THREADS",
    "KERAS_RNNLM_MALLOC",
    "CUDA_VISIBLE_DEVICES",
    "JAX_PLATFORMS",
)

#: Distribution names of each library, tried in order.
_DISTRIBUTIONS = {
    "keras": ("keras", "keras-nightly"),
    "tensorflow": ("tensorflow", "tensorflow-cpu", "tf-nightly"),
    "numpy": ("numpy",),
    "jax": ("jax",),
    "jaxlib": ("jaxlib",),
}


def library_version(name):
    """The version of library ``name`` this process runs: its module's
    ``__version__`` if it is imported, else its installed distribution's;
    ``None`` if it is not installed."""
    module = sys.modules.get(name)
    version = getattr(module, "__version__", None)
    if version:
        return str(version)
    for dist in _DISTRIBUTIONS.get(name, (name,)):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _cpuinfo():
    """The first processor's ``key: value`` lines of /proc/cpuinfo."""
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    if info:
                        break
                    continue
                key, _, value = line.partition(":")
                info.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return info


def _cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count()


def cpu():
    """``{"model", "isa", "cores"}``: the CPU's model name, which of
    :data:`ISA_FLAGS` it has, and the cores this process may use."""
    info = _cpuinfo()
    model = (
        info.get("model name")
        or info.get("Model")
        or platform.processor()
        or platform.machine()
    )
    flags = set((info.get("flags") or info.get("Features") or "").split())
    return {
        "model": model,
        "isa": [f for f in ISA_FLAGS if f in flags],
        "cores": _cores(),
    }


def git_commit(path=None):
    """The git commit of the working tree holding ``path`` (default: the
    current directory), ``+dirty`` if tracked files differ from it; None
    outside a git checkout."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=path or os.getcwd(),
            capture_output=True,
            text=True,
            timeout=5,
        )
        commit = out.stdout.strip() or None
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=path or os.getcwd(),
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
        return f"{commit}+dirty" if commit and dirty else commit
    except (OSError, subprocess.SubprocessError):
        return None


def environment():
    """The libraries, backend, package version and commit, CPU and the
    set variables of :data:`NUMERIC_ENV` of this process: what
    ``results.json`` and ``run.json`` record beside a run's figures."""
    return {
        "python": platform.python_version(),
        "keras": library_version("keras"),
        "backend": keras.backend.backend(),
        "tensorflow": library_version("tensorflow"),
        "jax": library_version("jax"),
        "numpy": library_version("numpy"),
        "keras_rnnlm": __version__,
        "git_commit": git_commit(PACKAGE_DIR),
        "platform": platform.platform(),
        "cpu": cpu(),
        "env": {k: os.environ[k] for k in NUMERIC_ENV if k in os.environ},
    }
