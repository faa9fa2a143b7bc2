"""Fields every bench record carries, and the thread setting, in one place
(for the benches that run TensorFlow and PyTorch in one process)."""

import datetime
import os
import platform
import statistics
import sys
import time

#: Timed evaluation passes per process (see :func:`median_rate`).
EVAL_PASSES = 3

#: Tokens of the PTB validation split: the default length of a timed
#: evaluation pass (see :func:`add_eval_tokens_argument`).
PTB_VALID_TOKENS = 73760


def add_eval_tokens_argument(parser):
    """``--eval-tokens``: the tokens of one timed evaluation pass (one
    ``evaluate()`` call, as training validates). A short pass mostly
    times ``evaluate()``'s fixed per-call set-up (~70-100 ms)."""
    parser.add_argument(
        "--eval-tokens",
        type=int,
        default=PTB_VALID_TOKENS,
        help="tokens per timed evaluation pass (default: the PTB "
        "validation split's 73,760: one evaluate() call per validation "
        "pass, as training runs it; a short pass mostly times "
        "evaluate()'s fixed per-call set-up, ~70-100 ms)",
    )


def eval_steps(tokens, batch, bptt):
    """Batches of ``batch`` x ``bptt`` covering ``tokens`` (rounded up)."""
    return -(-tokens // (batch * bptt))


def set_threads(threads, torch=None):
    """Intra/inter-op threads of TensorFlow (and torch, if given)."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    if torch is not None:
        torch.set_num_threads(threads)


def common_fields(script, argv, threads, **extra):
    """device, date, command (as typed), threads, 1-min load, ``extra``."""
    args = argv if argv is not None else sys.argv[1:]
    return {
        "device": f"CPU {platform.machine()}, {os.cpu_count()} cores",
        "date": datetime.date.today().isoformat(),
        "command": f"python bench/{script} {' '.join(args)}".strip(),
        "threads": threads,
        "load_avg_1m": round(os.getloadavg()[0], 2),
        **extra,
    }


def median_rate(one_pass, tokens, passes=EVAL_PASSES):
    """Median tokens/s over ``passes`` timed calls of ``one_pass()``.

    One timed pass per process is not enough on this VM: an occasional
    whole evaluation call runs at about half speed (seen at 1 thread with
    the other core idle: Zaremba medium, 1,765-1,769 vs 3,300-3,500 tok/s,
    in the timed pass of 2 of 3 processes of one bench run, twice, and in
    1 of 26 calls of one process; Zaremba small, 2 of 12 calls in 3
    processes), so the median of three processes was a matter of luck.
    Every implementation of a bench is timed by this same rule.
    """
    rates = []
    for _ in range(passes):
        t = time.perf_counter()
        one_pass()
        rates.append(tokens / (time.perf_counter() - t))
    return statistics.median(rates)
