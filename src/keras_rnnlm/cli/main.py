"""Running a parsed ``keras-rnnlm`` command: the verb's module, imported
only now, under the command line's one error policy.

The parser itself (:func:`build_parser`) and the console script's
:func:`main` are :mod:`keras_rnnlm_launcher`'s: they need neither Keras
nor this package until a verb runs.
"""

import importlib
import sys

from keras_rnnlm.cli.errors import debug_requested
from keras_rnnlm.cli.errors import resume_command
from keras_rnnlm.cli.errors import run_reporting_errors
from keras_rnnlm.cli.process import prepare_process
from keras_rnnlm_launcher import build_parser
from keras_rnnlm_launcher import main


def command_function(target):
    """The function ``"MODULE:FUNCTION"`` names (a verb's ``target``)."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def run_command(args, argv=None):
    """Runs the verb of parsed ``keras-rnnlm`` arguments (parsed from
    ``argv``, default ``sys.argv[1:]``: what an interrupted training
    names to resume); returns its exit status (2 after a user error).
    First sets the process up (:func:`keras_rnnlm.cli.process.
    prepare_process`: glibc's allocator and the compile cache, before
    the first TensorFlow op)."""
    prepare_process()
    func = command_function(args.target)
    debug = args.debug or debug_requested([])
    argv = sys.argv[1:] if argv is None else argv
    return run_reporting_errors(
        args.command,
        lambda: func(args),
        debug,
        resume=resume_command(argv, ["keras-rnnlm"]),
    )


__all__ = ["build_parser", "command_function", "main", "run_command"]
