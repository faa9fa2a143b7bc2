"""The command line's one error policy.

A user error (a bad config key or value, a missing or corrupt corpus, an
unreadable or missing file, a corrupt file of a run, a run directory in
use by another training, a malformed input file, a bad combination of
flags) prints one line, ``keras-rnnlm COMMAND: error: MESSAGE`` (a
recipe script: ``SCRIPT.py: error: MESSAGE``), and exits with status 2.
``--debug`` (or ``KERAS_RNNLM_DEBUG=1``) re-raises instead, so the
traceback is shown. Anything else is a bug and keeps its traceback.

Training stopped by Ctrl-C or SIGTERM prints one line, where its
checkpoint is and the command that resumes it (the one the user ran),
and exits with the signal's status (130, 143).

A command that fails where XLA's compile cache holds damaged program
files (:mod:`keras_rnnlm._compile_cache`) removes them and says so in one
line (status 2): the next run compiles them anew.
"""

import errno
import json
import os
import shlex
import shutil
import sys

from keras_rnnlm._compile_cache import ENV as CACHE_ENV
from keras_rnnlm._compile_cache import remove_damaged_programs
from keras_rnnlm.callbacks import CheckpointWriteError
from keras_rnnlm.callbacks import TrainingDivergedError
from keras_rnnlm.callbacks import TrainingInterrupted
from keras_rnnlm.config import ConfigError
from keras_rnnlm.data.errors import DataError
from keras_rnnlm.runs import RunFileError
from keras_rnnlm.runs import RunLockedError
from keras_rnnlm.scoring.nbest import NBestFormatError

USER_ERRORS = (
    ConfigError,
    DataError,
    NBestFormatError,
    TrainingDivergedError,
    CheckpointWriteError,
    RunFileError,
    RunLockedError,
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


def output_folder(path, flag="--out"):
    """Creates the output folder ``path`` (of option ``flag``) if needed,
    before any work; a file there is a usage error naming the flag."""
    if path is None:
        return None
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(
            f"{flag} {path} is a file: give a folder (new or existing)"
        )
    os.makedirs(path, exist_ok=True)
    return path


def debug_requested(argv):
    """Whether ``--debug`` is among ``argv`` or ``KERAS_RNNLM_DEBUG`` is
    set."""
    return "--debug" in argv or os.environ.get("KERAS_RNNLM_DEBUG") == "1"


def invoked_command(argv, program):
    """The command line that ran this program with arguments ``argv``, as
    the user typed it where that is known: ``python recipes/x.py ...``,
    ``keras-rnnlm train ...``, ``python -m keras_rnnlm.cli train ...``.

    ``program`` is what stands before ``argv`` when the process's own
    command line is not the one of ``argv`` (a call from Python).
    """
    argv = list(argv)
    orig = list(getattr(sys, "orig_argv", None) or [])
    if argv != sys.argv[1:] or len(orig) < len(sys.argv):
        return [*program, *argv]
    prefix = orig[: len(orig) - len(sys.argv) + 1]
    script = sys.argv[0]
    name = os.path.basename(script)
    if len(prefix) == 2 and not name.endswith(".py") and prefix[1] == script:
        # a console script (``keras-rnnlm``): its name when PATH finds it
        found = shutil.which(name)
        if found and os.path.realpath(found) == os.path.realpath(script):
            return [name, *argv]
        return [script, *argv]
    return [*prefix, *argv]


def resume_command(argv, program):
    """:func:`invoked_command` without ``--no-resume``: what resumes an
    interrupted run, quoted for a shell."""
    words = invoked_command(argv, program)
    return shlex.join([w for w in words if w != "--no-resume"])


def run_reporting_errors(command, func, debug=False, prog=None, resume=None):
    """Runs ``func()``; a user error prints one line and returns 2.

    Args:
        command: the verb (``keras-rnnlm COMMAND: error: ...``).
        func: what to run.
        debug: re-raise instead.
        prog: the messages' prefix instead of ``keras-rnnlm COMMAND`` (a
            recipe script's name).
        resume: the command that resumes an interrupted training (see
            :func:`resume_command`).
    """
    prog = prog or f"keras-rnnlm {command}"
    try:
        return func()
    except (UsageError, *USER_ERRORS) as e:
        if debug:
            raise
        print(f"{prog}: error: {_message(e)}", file=sys.stderr)
        return 2
    except OSError as e:
        if debug or errno.errorcode.get(e.errno) not in DISK_ERRNOS:
            raise
        print(f"{prog}: error: {_message(e)}", file=sys.stderr)
        return 2
    except TrainingInterrupted as e:
        if debug:
            raise
        print(_interrupted_message(prog, e, resume), file=sys.stderr)
        return e.exit_status
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except Exception:
        removed = [] if debug else remove_damaged_programs()
        if not removed:
            raise
        print(
            f"{prog}: error: {len(removed)} damaged program file(s) in "
            f"XLA's compile cache {os.path.dirname(removed[0])} were "
            f"removed; run the command again ({CACHE_ENV}=off turns the "
            "cache off)",
            file=sys.stderr,
        )
        return 2


def _interrupted_message(prog, e, resume):
    again = "resume" if e.checkpoint else "start again"
    tail = f"; {again} with: {resume}" if resume else ""
    return f"{prog}: interrupted by {e.signal_name}: {e.where()}{tail}"


def _message(e):
    if isinstance(e, KeyError) and e.args:
        return str(e.args[0])
    if isinstance(e, OSError) and e.filename and e.strerror:
        # one wording for a path: "No such file or directory: PATH"
        return f"{e.strerror}: {e.filename}"
    return str(e) or type(e).__name__
