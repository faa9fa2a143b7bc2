"""Quiet start-up: TensorFlow's import lines filtered by the user's log
level.

Importing TensorFlow (2.21, on a machine without a GPU) prints, through
absl's logging before anything initialises it, an absl banner (``WARNING:
All log messages before absl::InitializeLog() is called are written to
STDERR``) and INFO lines (``oneDNN custom operations are on``, ``Could not
find cuda drivers``), once for each of its two native libraries. These
lines ignore ``TF_CPP_MIN_LOG_LEVEL``, TensorFlow's documented knob for
its C++ log level: with ``TF_CPP_MIN_LOG_LEVEL=3`` they still stood before
every one-line error of the command line.

So ``import keras_rnnlm`` (the first thing a command that runs, a recipe
and any user code do) sets ``TF_CPP_MIN_LOG_LEVEL`` to 3 unless the user
set it, then imports TensorFlow with the process's standard error (file
descriptor 2) sent to a temporary file, and writes back what the level
lets through: an absl line (``I``, ``W``, ``E`` or ``F`` and a timestamp)
of a severity at or above the level, with its continuation lines, and
every line that is not absl's (a Python warning, say); the banner only
where an absl line is kept. ``TF_CPP_MIN_LOG_LEVEL=0`` keeps everything
(nothing is filtered). Descriptor 2 is restored afterwards, so
everything later (and any import error) is printed as usual.

This module is the bottom of the package's layers: it runs before
``keras_rnnlm/__init__.py`` imports the layers (which load Keras and so
TensorFlow) to register them.
"""

import os
import re
import sys
import tempfile

#: TensorFlow's C++ log severities, by ``TF_CPP_MIN_LOG_LEVEL`` value.
SEVERITIES = "IWEF"
#: The header of an absl log line: severity, date, time (before absl is
#: initialised: ``0000 00:00:`` and the seconds since the epoch), thread,
#: ``file:line]``.
_ABSL_LINE = re.compile(rb"([IWEF])\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [^ \]]+:\d+\]")
_ABSL_BANNER = b"WARNING: All log messages before absl::InitializeLog()"


def tf_min_log_level():
    """``TF_CPP_MIN_LOG_LEVEL`` as TensorFlow reads it (0 if unset or
    not an integer)."""
    try:
        return int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0"))
    except ValueError:
        return 0


def quiet_tensorflow_startup():
    """Imports TensorFlow with its start-up lines filtered by
    ``TF_CPP_MIN_LOG_LEVEL`` (set to 3 unless the user set it). A no-op
    on the JAX and PyTorch backends, once TensorFlow is imported, and at
    level 0."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if os.environ.get("KERAS_BACKEND", "tensorflow") != "tensorflow":
        return
    level = tf_min_log_level()
    if level <= 0 or "tensorflow" in sys.modules:
        return
    sys.stderr.flush()
    with tempfile.TemporaryFile() as captured:
        saved = os.dup(2)
        os.dup2(captured.fileno(), 2)
        try:
            import tensorflow  # noqa: F401  (loaded here, once, filtered)
        except ImportError:
            pass
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            kept = filter_log_lines(captured.read(), level)
            if kept:
                os.write(2, kept)


def filter_log_lines(text, level):
    """The lines of ``text`` (bytes written to standard error) that
    ``TF_CPP_MIN_LOG_LEVEL=level`` lets through (see the module doc)."""
    kept, keep, banner = [], True, None
    for line in text.splitlines(keepends=True):
        if line.startswith(_ABSL_BANNER):
            banner = line
            continue
        header = _ABSL_LINE.match(line)
        if header:
            keep = SEVERITIES.index(header.group(1).decode()) >= level
            if keep and banner:
                kept.append(banner)
                banner = None
        if keep:
            kept.append(line)
    return b"".join(kept)
