"""The command line's one error policy.

A user error (a bad config key or value, a missing or corrupt corpus, an
unreadable or missing file, a malformed input file, a bad combination of
flags) prints one line, ``keras-rnnlm COMMAND: error: MESSAGE``, and exits
with status 2. ``--debug`` (or ``KERAS_RNNLM_DEBUG=1``) re-raises instead,
so the traceback is shown. Anything else is a bug and keeps its
traceback.
"""

import errno
import json
import os
import sys

from keras_rnnlm.callbacks import CheckpointWriteError
from keras_rnnlm.callbacks import TrainingDivergedError
from keras_rnnlm.config import ConfigError
from keras_rnnlm.data.errors import DataError
from keras_rnnlm.scoring.nbest import NBestFormatError

USER_ERRORS = (
    ConfigError,
    DataError,
    NBestFormatError,
    TrainingDivergedError,
    CheckpointWriteError,
    FileNotFoundError,
    FileExistsError,
    IsADirectoryError,
    NotADirectoryError,
    PermissionError,
    UnicodeDecodeError,
    json.JSONDecodeError,
)


# A full or read-only disk is the user's to fix, wherever it is hit.
DISK_ERRNOS = frozenset(
    e for e in ("ENOSPC", "EROFS", "EDQUOT") if hasattr(errno, e)
)


class UsageError(Exception):
    """A bad combination of command-line arguments."""


def debug_requested(argv):
    """Whether ``--debug`` is among ``argv`` or ``KERAS_RNNLM_DEBUG`` is
    set."""
    return "--debug" in argv or os.environ.get("KERAS_RNNLM_DEBUG") == "1"


def run_reporting_errors(command, func, debug=False):
    """Runs ``func()``; a user error prints one line and returns 2."""
    try:
        return func()
    except (UsageError, *USER_ERRORS) as e:
        if debug:
            raise
        print(f"keras-rnnlm {command}: error: {_message(e)}", file=sys.stderr)
        return 2
    except OSError as e:
        if debug or errno.errorcode.get(e.errno) not in DISK_ERRNOS:
            raise
        print(f"keras-rnnlm {command}: error: {_message(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"keras-rnnlm {command}: interrupted", file=sys.stderr)
        return 130


def _message(e):
    if isinstance(e, KeyError) and e.args:
        return str(e.args[0])
    if type(e) in (
        OSError,
        FileNotFoundError,
        PermissionError,
        IsADirectoryError,
    ):
        if e.filename and e.strerror:
            return f"{e.strerror}: {e.filename}"
    return str(e) or type(e).__name__
