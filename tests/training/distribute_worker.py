"""Run by tests/training/test_distribute.py in a JAX subprocess with
several (virtual) CPU devices: trains one config on one device and data
parallel, and writes what the test compares (losses per step, weights,
results, the carried state's sharding) to ``OUT/NAME.npz``/``.json``.

Usage: python distribute_worker.py CONFIG_JSON OUT NAME [NAME ...]
where NAME is ``single`` (train.distribute=none), ``parallel``
(data_parallel) or ``killed`` (data_parallel, killed at the batch
``KILL_AT`` of the config's last epoch and resumed).

``multi`` and ``multi_killed`` are ``parallel`` and ``killed`` run as one
of several processes (``KERAS_DISTRIBUTION_JOB_ADDRESSES`` /
``_NUM_PROCESSES`` / ``_PROCESS_ID``): every process trains into the same
``OUT/NAME`` and writes ``OUT/NAME-P.json``/``.npz`` (P its id), with the
files it wrote (opened for writing, renamed, removed or made) under the
run directory, recorded by an audit hook.
"""

import json
import os
import sys

import keras
import numpy as np

from keras_rnnlm.config import RunConfig
from keras_rnnlm.config import apply_overrides
from keras_rnnlm.training import train
from tests.interrupting import Killed
from tests.interrupting import kill
from tests.run_dirs import checkpoint_weights


class _Losses(keras.callbacks.Callback):
    """The loss of every training batch (Keras logs the epoch's running
    mean; the per-batch loss is recovered from consecutive means)."""

    def __init__(self):
        super().__init__()
        self.means = []

    def on_epoch_begin(self, epoch, logs=None):
        self.means.append([])

    def on_train_batch_end(self, batch, logs=None):
        self.means[-1].append(float(logs["loss"]))


class _StateSharding(keras.callbacks.Callback):
    """How the training model's carried state and weights are placed."""

    def __init__(self):
        super().__init__()
        self.seen = {}

    def on_train_batch_end(self, batch, logs=None):
        if self.seen:
            return
        for v in self.model.variables:
            if v.path.endswith("rnn_state") or v.trainable:
                kind = "state" if v.path.endswith("rnn_state") else "weight"
                s = v.value.sharding
                shard = s.shard_shape(v.value.shape)
                self.seen.setdefault(kind, []).append(
                    {
                        "path": v.path,
                        "shape": list(v.value.shape),
                        "shard": list(shard),
                        "devices": len(s.device_set),
                    }
                )


class _Writes:
    """The writes (``open`` for writing, rename, remove, mkdir) this
    process makes under ``directory`` (``sys.addaudithook``)."""

    def __init__(self, directory):
        self.directory = os.path.abspath(directory)
        self.paths = []
        self.active = True
        sys.addaudithook(self._hook)

    def _under(self, path):
        if not isinstance(path, (str, bytes, os.PathLike)):
            return False
        path = os.path.abspath(os.fsdecode(path))
        return path.startswith(self.directory)

    def _hook(self, event, args):
        if not self.active:
            return
        if event == "open":
            path, mode = args[0], args[1]
            if isinstance(mode, str) and any(c in mode for c in "wax+"):
                self._record(path)
            elif isinstance(args[2], int) and args[2] & (
                os.O_WRONLY | os.O_RDWR | os.O_CREAT
            ):
                self._record(path)
        elif event in ("os.rename", "os.remove", "os.mkdir"):
            self._record(args[0])

    def _record(self, path):
        if self._under(path):
            self.paths.append(os.fsdecode(path))


def run(config, out, name):
    distribute = "none" if name == "single" else "data_parallel"
    process = os.environ.get("KERAS_DISTRIBUTION_PROCESS_ID")
    tag = name if process is None else f"{name}-{process}"
    writes = _Writes(os.path.join(out, name))
    cfg = apply_overrides(
        config,
        [
            f"train.out_dir={os.path.join(out, name)}",
            f"train.distribute={distribute}",
        ],
    )
    losses, sharding = _Losses(), _StateSharding()
    if name in ("killed", "multi_killed"):
        kill_at = int(os.environ["KILL_AT"])
        try:
            train(cfg, callbacks=[kill(cfg.train.epochs - 1, kill_at)])
        except Killed:
            pass
        else:
            raise AssertionError("the run was not killed")
    results = train(cfg, callbacks=[losses, sharding])
    writes.active = False
    np.savez(
        os.path.join(out, f"{tag}.npz"),
        *checkpoint_weights(apply_overrides(cfg, ["train.distribute=none"])),
    )
    with open(os.path.join(out, f"{tag}.json"), "w") as f:
        json.dump(
            {
                "losses": losses.means,
                "results": results,
                "sharding": sharding.seen,
                "devices": len(keras.distribution.list_devices()),
                "writes": writes.paths,
            },
            f,
        )


def main(argv):
    config = RunConfig.from_dict(json.load(open(argv[0])))
    for name in argv[2:]:
        run(config, argv[1], name)


if __name__ == "__main__":
    main(sys.argv[1:])
