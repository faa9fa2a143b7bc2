"""Python's cyclic garbage collector, kept off the objects a command's
imports create.

What it saves: importing TensorFlow and Keras creates millions of Python
objects (modules, classes, functions, protobuf descriptors) that live as
long as the process. Python's cyclic collector walks every object it
tracks at each full collection: several times during the imports, now
and then in a long run, and again as the interpreter shuts down.
Measured on a 2-core AMD EPYC (AVX-512), Python 3.11, TensorFlow 2.21:
a ``python -c "import tensorflow"`` process spent 3.0 s in the import
and about 1 s more to end (``perf`` puts a fifth of such a process in
``gc_collect_main``); a one-sentence ``keras-rnnlm score`` took 3.17 s
from start to exit against 4.74 s without this (``python -m
bench.cli_start --baseline COMMIT``, records in
``bench/results/startup.jsonl``), for about 2.5 MB more resident memory
(the imports' own cyclic garbage, kept).

What it does, only where a command runs (never on ``import
keras_rnnlm`` alone):

* the ``keras-rnnlm`` console script runs the imports of a verb that
  runs inside :func:`paused`: the collector off while they load, the
  objects alive at the end frozen (``gc.freeze``: moved to the permanent
  generation, which no collection walks), then the collector on again;
* every command (the console script's verbs, ``python -m
  keras_rnnlm.cli``, a recipe, a tuning recipe) calls
  :func:`freeze_imports` as it starts
  (:func:`keras_rnnlm.cli.process.prepare_process`), so the objects of
  whatever imports it made are frozen too.

Objects made after that are collected as usual. Only the first freeze
of a process is made: a process that runs several commands (a test
session) does not pin the garbage each one leaves, and one that froze
its objects itself is left as it is. A collector the user turned off
(``gc.disable()`` before the command) stays off.
"""

import contextlib
import gc


def freeze_imports():
    """Moves every object the collector tracks now to its permanent
    generation (``gc.freeze``), which no later collection walks, unless
    the process froze objects before."""
    if not gc.get_freeze_count():
        gc.freeze()


@contextlib.contextmanager
def paused():
    """The collector off for the block (if it was on), then the objects
    alive frozen (:func:`freeze_imports`) and the collector as it was:
    an import inside it builds its objects without a collection walking
    them again and again."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        freeze_imports()
        if was_on:
            gc.enable()


__all__ = ["freeze_imports", "paused"]
