"""The machinery every bench shares, one concern a module:

* :mod:`~bench.harness.machine`: facts of this machine (CPU model, ISA,
  cores, GPU) and of the checkout (git commit);
* :mod:`~bench.harness.isa`: capping the frameworks' vector ISA in a
  child's environment (``--isa``), and checking what they then run;
* :mod:`~bench.harness.records`: the record schema, the fields every
  record of a run shares, appending records to ``bench/results``;
* :mod:`~bench.harness.options`: the command-line options benches share;
* :mod:`~bench.harness.processes`: thread settings, child processes,
  interleaved repeats, medians, peak memory;
* :mod:`~bench.harness.timing`: timed passes, and the Keras side of a
  comparison (training and evaluation rates of a compiled model);
* :mod:`~bench.harness.trainer_runs`: the trainer run as a user runs it
  (a recipe through the CLI), and tokens/s after a warm-up, the rule
  every side of a comparison with it shares;
* :mod:`~bench.harness.torch_side`: the PyTorch side of a comparison;
* :mod:`~bench.harness.headlines`: the records' headline tables (for
  ``python -m bench.make_results``).

A paired bench runs each implementation (the package's Keras model, its
PyTorch reference, ...) in a fresh child process of the same module:
:func:`~bench.harness.options.paired_parser` gives its options,
:func:`~bench.harness.options.parse` turns the process into a child when
``--child`` is given, and the parent runs the children with
:func:`~bench.harness.processes.run_children` (repeats interleaved
across implementations) and takes
:func:`~bench.harness.processes.medians`.
"""

import os

#: The repository root (benches run from it: ``python -m bench.NAME``).
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
ROOT = os.path.abspath(ROOT)
#: Where the records go (one JSON-lines file a bench).
RESULTS = os.path.join(ROOT, "bench", "results")
#: Where training runs' logs are kept (see bench/README.md).
LOGS = os.path.join(ROOT, "bench", "logs")

# TensorFlow's C++ log lines drown a bench's output (set before its import).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
