"""Data-parallel training over several processes.

Two processes on 127.0.0.1 (JAX's CPU collectives), one CPU device each,
join through ``keras.distribution.initialize`` and train the AWD-style
run of ``test_distribute.py``; each feeds its own block of the streams.
They must equal the single-process run of the same seed, and only
process 0 may write the run directory.
"""

import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
from test_distribute import WORKER
from test_distribute import _awd_config
from test_distribute import _run_worker
from test_distribute import assert_resumed_run
from test_distribute import assert_same_run
from user_process import SUITE_SETTINGS

from keras_rnnlm.data.streams import LMSequence
from keras_rnnlm.data.streams import process_rows
from keras_rnnlm.runs import is_writer

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT = 1500  # seconds, each process


def test_one_process_feeds_every_row_and_writes():
    # no distribution (or one process): the whole batch, and this
    # process writes the run directory
    assert process_rows(6) == (0, 6)
    assert is_writer()
    x, y, w = LMSequence(np.arange(60), batch_size=6, bptt=4)[0]
    assert x.shape == y.shape == w.shape == (6, 4)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(cfg, out, names, num_processes=2, **env):
    """Runs the worker as ``num_processes`` processes joined on
    127.0.0.1; kills them all if one fails or the time runs out."""
    config = out / "config.json"
    config.write_text(cfg.to_json())
    environ = {k: v for k, v in os.environ.items() if k not in SUITE_SETTINGS}
    environ.update(
        KERAS_BACKEND="jax",
        XLA_FLAGS="--xla_force_host_platform_device_count=1",
        PYTHONPATH=os.path.join(HERE, "..", ".."),
        KERAS_DISTRIBUTION_JOB_ADDRESSES=f"127.0.0.1:{_free_port()}",
        KERAS_DISTRIBUTION_NUM_PROCESSES=str(num_processes),
        **env,
    )
    procs, logs = [], []
    for i in range(num_processes):
        log = open(out / f"process-{i}.log", "w+")
        logs.append(log)
        procs.append(
            subprocess.Popen(
                [sys.executable, WORKER, str(config), str(out), *names],
                env={**environ, "KERAS_DISTRIBUTION_PROCESS_ID": str(i)},
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
    deadline = time.monotonic() + TIMEOUT
    try:
        while any(p.poll() is None for p in procs):
            failed = [p for p in procs if p.returncode not in (None, 0)]
            if failed or time.monotonic() > deadline:
                break
            time.sleep(1)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    tails = []
    for i, log in enumerate(logs):
        log.seek(0)
        tails.append(f"--- process {i}:\n" + log.read()[-3000:])
        log.close()
    assert all(p.returncode == 0 for p in procs), "\n".join(tails)
    return [
        [
            (
                json.load(open(out / f"{name}-{i}.json")),
                list(np.load(out / f"{name}-{i}.npz").values()),
            )
            for i in range(num_processes)
        ]
        for name in names
    ]


@pytest.mark.slow
def test_two_processes_equal_one_process_and_resume(tiny_corpus_dir, tmp_path):
    pytest.importorskip("jax")
    cfg = _awd_config(tiny_corpus_dir)
    single_dir = tmp_path / "single"
    single_dir.mkdir()
    ((single, w_single),) = _run_worker(cfg, single_dir, ["single"])
    multi, killed = _launch(
        cfg, tmp_path, ["multi", "multi_killed"], KILL_AT="9"
    )
    for runs in (multi, killed):
        for info, _ in runs:
            assert info["devices"] == 2
            # the carried state is sharded over the two processes' devices
            for state in info["sharding"]["state"]:
                assert state["devices"] == 2
                assert state["shard"][0] == state["shape"][0] // 2
    # every process sees the same global run: the single-process run's
    # losses per step, weights and perplexities
    for info, weights in multi:
        assert_same_run(single, w_single, info, weights)
    # process 0 alone wrote the run directory
    for runs in (multi, killed):
        assert runs[0][0]["writes"], "process 0 wrote nothing"
        assert runs[1][0]["writes"] == []
    names = set(os.listdir(tmp_path / "multi"))
    assert {"config.json", "best.weights.h5", "results.json"} <= names
    assert {"run.json", "log.csv", "model.keras", "checkpoint"} <= names
    # killed in the middle of the last epoch (after batch 9, checkpointed
    # at batch 7) and resumed by both processes: the uninterrupted run
    for (info, weights), (k_info, k_weights) in zip(multi, killed):
        assert_resumed_run(info, weights, k_info, k_weights)
