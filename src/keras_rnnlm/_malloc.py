"""glibc's allocator, set for TensorFlow's compiled loops when a command
runs.

What it fixes: on a small machine, a process that has trained and then
evaluates at batch 1 with two threads would run some of its evaluation
passes at half speed (5-10k tok/s where a fresh process runs 11-13k, the
AWD-LSTM ``cpu`` shape on a 2-core machine). A profile of a slow pass
puts the extra CPU in kernel page faults and TLB-shootdown interrupts,
called from XLA:CPU packing a matrix operand into freshly allocated
memory on every call. Which of glibc's behaviours is at fault was found
by measuring, not by reading glibc: fewer arenas (one, or one a core)
remove the slow passes, a high trim threshold alone does not (below).

What it does: the programs call :func:`tune_malloc` when a command runs
(``keras-rnnlm``: :func:`keras_rnnlm.cli.main.run_command`; the recipes:
:func:`keras_rnnlm.cli.train.recipe_main` and the tuning recipes' mains),
before TensorFlow's first op; ``import keras_rnnlm`` alone leaves the
allocator as it is, and a program of one's own may call
:func:`tune_malloc` itself, before its first TensorFlow op. It sets one
of glibc's ``mallopt`` parameters, ``M_ARENA_MAX``, to the number of
cores the process may run on: one arena a core, where glibc's default
allows eight a core, so the compute threads share a few arenas and a
buffer freed by one is reused by the next. glibc's other settings, its
dynamic mmap and trim thresholds included, stay as they are.

Measured with the ``malloc_modes`` probe (``bench/malloc_modes.py`` at
commit 1f4ac49; AWD-LSTM ``cpu`` shape, two threads, a 2-core machine,
so two arenas; fresh processes of each setting, interleaved; each trains
10 timed steps, then evaluates at batch 10 and at batch 1; records in
``bench/results/malloc.jsonl``; the table in docs/performance.md, "The
allocator"). In two runs (three and four processes a setting) batch 1
ran at 1.92x and 1.63x glibc's defaults, training at 1.05x and 0.95x,
batch 10 at 1.07x and 0.91x, with the same peak RSS.

Why not one arena for all threads: it fixes batch 1 as well (1.68-1.78x
over three runs) but made the multi-cell LSTM's evaluation 0.85x glibc's
defaults (39.0k-40.2k tok/s against 44.0k-48.4k, three runs each; two
arenas 44.7k-47.3k). Why no fixed threshold: a 256 MiB trim threshold
alone made batch 1 slower than glibc's defaults (0.79x, 0.87x), and
with one arena it made PyTorch's mLSTM training 3.5x slower in a process
that had imported the package (3.0k char/s against 10.6k): fixing any
threshold turns off glibc's dynamic mmap threshold (``man mallopt``), so
every block above 128 KiB is mapped and unmapped on each use. Only a
2-core machine was measured; one arena a core is the rule carried to
larger ones.

Set after TensorFlow had started its threads, the arena limit helped in
only some processes (8.8k-11.7k tok/s at batch 1 in a test of one arena
with the trim threshold), so it is set before the first TensorFlow op:
importing TensorFlow starts none of its compute threads (they start with
the first op), so a command sets it after the package is imported.

Left alone when the user chose: ``KERAS_RNNLM_MALLOC=default`` turns it
off (``tuned``, the default, keeps it), and so does any
``glibc.malloc.*`` entry in ``GLIBC_TUNABLES`` or a ``MALLOC_*`` variable
of glibc's (``MALLOC_ARENA_MAX``, ``MALLOC_TRIM_THRESHOLD_``, ...).
Elsewhere than Linux with glibc (musl, macOS, Windows) it does nothing.
"""

import ctypes
import os
import platform
import sys

#: mallopt parameter numbers (glibc's malloc.h) and the values set.
M_ARENA_MAX = -8


def cores():
    """The cores this process may run on (its CPU affinity)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def settings():
    """``((param, value), ...)`` that :func:`tune_malloc` sets: one arena
    a core (``M_ARENA_MAX``)."""
    return ((M_ARENA_MAX, max(1, cores())),)


#: The environment variable that turns the tuning off (``default``).
ENV = "KERAS_RNNLM_MALLOC"
USER_VARIABLES = (
    "MALLOC_ARENA_MAX",
    "MALLOC_ARENA_TEST",
    "MALLOC_TRIM_THRESHOLD_",
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TOP_PAD_",
    "MALLOC_MMAP_MAX_",
)

#: What :func:`tune_malloc` did in this process: ``"tuned"``,
#: ``"default"`` (turned off by the user) or ``"unsupported"``; None
#: before it ran.
state = None


def user_chose(environ=None):
    """True when ``environ`` (default: this process's) turns the tuning
    off or sets glibc's malloc itself. A value of ``KERAS_RNNLM_MALLOC``
    other than ``tuned`` / ``default`` turns it off too, with one line on
    standard error (this runs as a command starts, outside its error
    policy)."""
    environ = os.environ if environ is None else environ
    value = environ.get(ENV, "tuned")
    if value not in ("tuned", "default"):
        print(
            f"keras_rnnlm: {ENV}={value!r} is neither 'tuned' (the "
            "default) nor 'default'; glibc's malloc is left as it is",
            file=sys.stderr,
        )
        return True
    return (
        value == "default"
        or "glibc.malloc." in environ.get("GLIBC_TUNABLES", "")
        or any(v in environ for v in USER_VARIABLES)
    )


def _glibc_mallopt():
    """glibc's ``mallopt``, or None where the C library is not glibc."""
    if not sys.platform.startswith("linux"):
        return None
    if platform.libc_ver()[0] != "glibc":
        return None
    try:
        return ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return None


def tune_malloc():
    """Sets :func:`settings` through ``mallopt`` unless the user chose
    (:func:`user_chose`); returns and records (:data:`state`) what was
    done. Call it before TensorFlow starts its threads."""
    global state
    if user_chose():
        state = "default"
        return state
    mallopt = _glibc_mallopt()
    if mallopt is None:
        state = "unsupported"
        return state
    ok = all(mallopt(param, value) == 1 for param, value in settings())
    state = "tuned" if ok else "unsupported"
    return state


def describe():
    """:data:`state`, with the settings where they were made (for
    benchmark records): ``"tuned: arena_max=2"``."""
    if state != "tuned":
        return state
    names = {M_ARENA_MAX: "arena_max"}
    return "tuned: " + ", ".join(f"{names[p]}={v}" for p, v in settings())
