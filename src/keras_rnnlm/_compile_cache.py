"""XLA's compiled programs kept on disk from one run of a command to the
next.

What it saves: every process compiles its XLA programs anew: the fused
recurrent loops (one per layer and window bucket), the evaluation's
window loop, a train step's pieces. On a small CPU that is seconds per
command, and the compiler's working memory raises the peak RSS. A
``keras-rnnlm`` command or a recipe, when it runs, points the backend's
own persistent cache at a directory, so a later run of the same model
and shapes loads the programs instead of compiling them: on TensorFlow
its XLA cache (``TF_XLA_FLAGS=--tf_xla_persistent_cache_directory``), on
JAX its compilation cache (``jax_compilation_cache_dir``, which keeps
programs that took at least JAX's minimum compile time). The first run
compiles and fills it, as before.

Measured (``keras-rnnlm evaluate`` on the AWD-LSTM ``cpu`` shape, test
split at batch 1, a 2-core AMD EPYC with AVX-512, TensorFlow 2.21): the
process's peak RSS 910 MB with an empty cache, 840 MB with a filled one.
``bench/upstream_eval.py`` records the command's time both ways.

Where: ``KERAS_RNNLM_COMPILE_CACHE`` names the directory (default
``$XDG_CACHE_HOME/keras_rnnlm/xla``, ``~/.cache/keras_rnnlm/xla``), or
``off`` turns the cache off. Programs are kept under a subdirectory per
:func:`cache_key`: the backend and its version, the CPU's model and
instruction-set flags, and the XLA flags that change code generation
(``XLA_FLAGS``, an ISA cap among them) and the thread settings, so a
cache on a shared home directory never hands one machine's code to
another. The directory may
be deleted at any time; nothing else is kept there.

A damaged program file (cut short or overwritten by something else;
TensorFlow itself writes each file whole and moves it into place) makes
TensorFlow's load fail: the command's error policy then removes the
damaged files (:func:`remove_damaged_programs`) and says so in one line,
and the next run compiles them anew.

Left alone when the user chose: ``TF_XLA_FLAGS`` that already name a
persistent cache directory, or ``jax_compilation_cache_dir`` set on JAX.
A directory that cannot be created leaves the cache off. ``import
keras_rnnlm`` alone does none of this; a program of one's own may call
:func:`use_compile_cache` before its first compilation.
"""

import hashlib
import os
import platform
import re

from keras_rnnlm._environment import _cpuinfo
from keras_rnnlm._environment import library_version

#: The environment variable naming the cache directory, or ``off``.
ENV = "KERAS_RNNLM_COMPILE_CACHE"
#: TensorFlow's flag (in ``TF_XLA_FLAGS``) for its persistent XLA cache.
TF_FLAG = "--tf_xla_persistent_cache_directory"

#: The environment variables that change the compiled code (the ISA cap
#: among XLA's flags) or how it is threaded: part of :func:`cache_key`.
KEY_VARIABLES = (
    "XLA_FLAGS",
    "TF_XLA_FLAGS",
    "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
    "PJRT_NPROC",
)

#: The directory :func:`use_compile_cache` pointed the backend at in this
#: process (``None``: none, see :data:`state`).
directory = None
#: What :func:`use_compile_cache` did: ``"on"``, ``"off"`` (turned off),
#: ``"user"`` (the user's own setting kept) or ``"unavailable"`` (the
#: directory could not be created); ``None`` before it ran.
state = None


def _backend(environ):
    return environ.get("KERAS_BACKEND", "tensorflow")


def cache_key(environ=None):
    """The subdirectory of the programs this process compiles: a digest
    of the backend and its version, the CPU's model and flags and
    :data:`KEY_VARIABLES`."""
    environ = os.environ if environ is None else environ
    backend = _backend(environ)
    info = _cpuinfo()
    flags = info.get("flags") or info.get("Features") or ""
    parts = [
        backend,
        library_version("jaxlib" if backend == "jax" else backend) or "",
        platform.machine(),
        info.get("model name") or info.get("Model") or platform.processor(),
        " ".join(sorted(flags.split())),
        *(environ.get(name, "") for name in KEY_VARIABLES),
    ]
    digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    return f"{backend}-{digest}"


def cache_root(environ=None):
    """The cache's directory (:data:`ENV`, else the user's cache
    directory), or ``None`` when it is turned off."""
    environ = os.environ if environ is None else environ
    value = environ.get(ENV, "").strip()
    if value.lower() == "off":
        return None
    if value:
        return os.path.expanduser(value)
    base = environ.get("XDG_CACHE_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache"
    )
    return os.path.join(base, "keras_rnnlm", "xla")


def _user_set(backend, environ):
    if backend == "jax":
        import jax  # the JAX backend

        return bool(jax.config.jax_compilation_cache_dir)
    return TF_FLAG in environ.get("TF_XLA_FLAGS", "")


def use_compile_cache(environ=None):
    """Points the backend's persistent compilation cache at
    ``cache_root()/cache_key()`` (see the module doc); returns that
    directory, or ``None`` (off, the user's own, or not creatable).
    TensorFlow reads its flag at the first XLA compilation, so this runs
    before it; on other backends than TensorFlow and JAX it does
    nothing."""
    global directory, state
    environ = os.environ if environ is None else environ
    backend = _backend(environ)
    root = cache_root(environ)
    if backend not in ("tensorflow", "jax") or root is None:
        state = "off"
        return None
    if _user_set(backend, environ):
        state = "user"
        return None
    path = os.path.join(root, cache_key(environ))
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        state = "unavailable"
        return None
    if backend == "jax":
        import jax  # the JAX backend

        jax.config.update("jax_compilation_cache_dir", path)
    else:
        flags = environ.get("TF_XLA_FLAGS", "")
        environ["TF_XLA_FLAGS"] = f"{flags} {TF_FLAG}={path}".strip()
    directory, state = path, "on"
    return path


#: How TensorFlow names a program of its persistent cache.
TF_PROGRAM = re.compile(r"^xla_compile_cache__.*\.pb$")


def damaged_programs(path):
    """The program files of TensorFlow's cache directory ``path`` that
    are not a whole protocol-buffer message (cut short, or not one at
    all)."""
    from google.protobuf import empty_pb2  # TensorFlow's dependency
    from google.protobuf.message import DecodeError

    damaged = []
    for name in sorted(os.listdir(path)):
        if not TF_PROGRAM.match(name):
            continue
        file = os.path.join(path, name)
        try:
            with open(file, "rb") as f:
                empty_pb2.Empty().ParseFromString(f.read())
        except DecodeError:
            damaged.append(file)
        except OSError:
            continue
    return damaged


def remove_damaged_programs():
    """Removes the damaged program files (:func:`damaged_programs`) of the
    TensorFlow cache this process uses; returns their paths (``[]`` where
    the cache is not this package's TensorFlow cache)."""
    if state != "on" or not directory or not os.path.isdir(directory):
        return []
    if _backend(os.environ) != "tensorflow":
        return []
    removed = []
    for file in damaged_programs(directory):
        try:
            os.remove(file)
        except OSError:
            continue
        removed.append(file)
    return removed
