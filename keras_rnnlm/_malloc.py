"""glibc's allocator, set for TensorFlow's compiled loops at import.

What it fixes: on a small machine, a process that has trained and then
evaluates at batch 1 with two threads would run some of its evaluation
passes at half speed (5-10k tok/s where a fresh process runs 11-13k, the
AWD-LSTM ``cpu`` shape on a 2-core machine). A profile of a slow pass
puts the extra CPU in kernel page faults and TLB-shootdown interrupts,
called from XLA:CPU packing a matrix operand into freshly allocated
memory on every call: glibc gives each compute thread its own arena and
hands freed pages back to the kernel, so every call faults them in
again, and every hand-back interrupts the other core.

What it does: ``import keras_rnnlm`` calls :func:`tune_malloc` before
TensorFlow is loaded. It sets two of glibc's ``mallopt`` parameters:

- ``M_ARENA_MAX`` = 1: one arena for every thread, so a buffer freed by
  one compute thread is reused by the next, whichever thread it is;
- ``M_TRIM_THRESHOLD`` = 256 MiB: free memory at the top of the heap is
  returned to the kernel once it exceeds 256 MiB (glibc's default starts
  at 128 KiB), so the per-call buffers stay mapped. What is kept is
  bounded by this threshold.

Measured (six fresh processes each, AWD-LSTM ``cpu`` shape, a short
``model.fit`` then six batch-1 passes of 11k tokens at two threads):
without it the processes' medians were 5.2k, 6.4k, 8.6k, 10.1k, 10.1k
and 10.1k tok/s; with it, 10.8k to 12.8k, the same as the same settings
given through ``GLIBC_TUNABLES`` at process start (11.1k to 11.9k).
Setting them after TensorFlow had started its threads helped in only
some processes (8.8k to 11.7k). The figures and the command are in
docs/performance.md.

Left alone when the user chose: ``KERAS_RNNLM_MALLOC=default`` turns it
off (``tuned``, the default, keeps it), and so does any
``glibc.malloc.*`` entry in ``GLIBC_TUNABLES`` or a ``MALLOC_ARENA_MAX``
/ ``MALLOC_TRIM_THRESHOLD_`` variable. Elsewhere than Linux with glibc
(musl, macOS, Windows) it does nothing.
"""

import ctypes
import os
import platform
import sys

#: mallopt parameter numbers (glibc's malloc.h) and the values set.
M_TRIM_THRESHOLD = -1
M_ARENA_MAX = -8
SETTINGS = ((M_ARENA_MAX, 1), (M_TRIM_THRESHOLD, 256 * 2**20))

#: The environment variable that turns the tuning off (``default``).
ENV = "KERAS_RNNLM_MALLOC"
USER_VARIABLES = ("MALLOC_ARENA_MAX", "MALLOC_TRIM_THRESHOLD_")

#: What :func:`tune_malloc` did in this process: ``"tuned"``,
#: ``"default"`` (turned off by the user) or ``"unsupported"``; None
#: before it ran.
state = None


def user_chose(environ=None):
    """True when ``environ`` (default: this process's) turns the tuning
    off or sets glibc's malloc itself. A value of ``KERAS_RNNLM_MALLOC``
    other than ``tuned`` / ``default`` turns it off too, with one line on
    standard error (this runs at import, before any error policy)."""
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
    """Sets :data:`SETTINGS` through ``mallopt`` unless the user chose
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
    ok = all(mallopt(param, value) == 1 for param, value in SETTINGS)
    state = "tuned" if ok else "unsupported"
    return state
