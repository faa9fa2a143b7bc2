"""The command-line options benches share."""

import argparse
import os
import sys

from bench.harness import RESULTS
from bench.harness.processes import child_main

#: Tokens of the PTB validation split: the default length of a timed
#: evaluation pass (see :func:`add_eval_tokens_argument`).
PTB_VALID_TOKENS = 73760

#: Tokens of the PTB training split (seconds per epoch from tokens/s).
PTB_TRAIN_TOKENS = 929589


def bench_parser(module, doc):
    """The option parser of ``python -m MODULE``: its usage line names the
    command, its help is the bench's docstring."""
    return argparse.ArgumentParser(
        prog=f"python -m {module}",
        description=doc,
        formatter_class=argparse.RawTextHelpFormatter,
    )


def paired_parser(
    module,
    doc,
    filename,
    impls,
    repeats,
    threads=0,
    repeats_help="interleaved repeats of each measurement",
):
    """The options of a paired bench: ``--impls`` (default ``impls``),
    ``--repeats``, ``--threads``, ``--out`` / ``--no-record`` and the hidden
    ``--child``; the bench adds its own and calls :func:`parse`."""
    parser = bench_parser(module, doc)
    parser.add_argument("--impls", nargs="+", default=list(impls))
    parser.add_argument(
        "--repeats", type=int, default=repeats, help=repeats_help
    )
    add_threads_argument(parser, threads)
    add_output_arguments(parser, filename)
    add_child_argument(parser)
    return parser


def parse(parser, measure, argv=None):
    """``parser.parse_args(argv)``; in a child process (``--child``) runs
    :func:`bench.harness.processes.child_main` with ``measure`` and exits
    instead."""
    args = parser.parse_args(argv)
    if args.child:
        child_main(args, measure)
        sys.exit(0)
    return args


def add_output_arguments(parser, filename):
    """``--out`` (default ``bench/results/FILENAME``) and ``--no-record``
    (alias ``--no-write``: print only)."""
    parser.add_argument(
        "--out",
        default=os.path.join(RESULTS, filename),
        help="JSON-lines file the records are appended to (default: "
        "%(default)s)",
    )
    parser.add_argument(
        "--no-record",
        "--no-write",
        dest="no_record",
        action="store_true",
        help="print the results, write no record",
    )


def add_threads_argument(parser, default=1):
    """``--threads``: intra-op threads of TensorFlow and PyTorch alike."""
    parser.add_argument(
        "--threads",
        type=int,
        default=default,
        help="intra-op threads of TensorFlow and PyTorch alike (0: the "
        "frameworks' defaults; default: %(default)s). TensorFlow's "
        "default on a small shared machine times some calls at full "
        "speed and others at one core's; 1 gives stable comparisons",
    )


def add_eval_tokens_argument(parser):
    """``--eval-tokens``: the tokens of one timed evaluation pass."""
    parser.add_argument(
        "--eval-tokens",
        type=int,
        default=PTB_VALID_TOKENS,
        help="tokens per timed evaluation pass (default: the PTB "
        "validation split's 73,760: one evaluate() call per validation "
        "pass, as training runs it; a short pass mostly times "
        "evaluate()'s fixed per-call set-up, ~70-100 ms)",
    )


def add_child_argument(parser):
    """The hidden ``--child JSON`` of a bench's own child processes."""
    parser.add_argument("--child", help=argparse.SUPPRESS)


def add_overrides_argument(parser, help_text="config overrides"):
    """``--set KEY=VALUE`` (repeatable): overrides of a recipe preset."""
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=help_text,
    )


def windows_for(tokens, batch, bptt):
    """Batches of ``batch`` x ``bptt`` covering ``tokens`` (rounded up)."""
    return -(-tokens // (batch * bptt))
