"""Fields every bench record carries, and the thread setting, in one place
(for the benches that run TensorFlow and PyTorch in one process)."""

import datetime
import os
import platform
import sys


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
