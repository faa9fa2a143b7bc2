"""A run's figures come with what they depend on: results.json and
run.json name the library versions, the backend, the commit and the CPU
of the process that produced them."""

import json
import os
import platform

import keras
import numpy as np

from keras_rnnlm._environment import environment
from keras_rnnlm.config import apply_overrides
from keras_rnnlm.training import train


def _check(env):
    assert env["python"] == platform.python_version()
    assert env["keras"] == keras.__version__
    assert env["numpy"] == np.__version__
    assert env["backend"] == keras.backend.backend()
    if env["backend"] == "tensorflow":
        import tensorflow as tf  # the TensorFlow backend only

        assert env["tensorflow"] == tf.__version__
    assert env["cpu"]["model"] and env["cpu"]["cores"] >= 1
    assert isinstance(env["cpu"]["isa"], list)
    assert "git_commit" in env and "env" in env


def test_results_and_run_json_record_the_environment(tiny_config):
    cfg = apply_overrides(tiny_config, ["train.epochs=1"])
    returned = train(cfg)
    with open(os.path.join(cfg.train.out_dir, "results.json")) as f:
        results = json.load(f)
    assert results["valid"]["ppl"] == returned["valid"]["ppl"]
    _check(results["environment"])
    with open(os.path.join(cfg.train.out_dir, "run.json")) as f:
        _check(json.load(f)["environment"])


def test_environment_lists_the_numeric_settings_that_are_set(monkeypatch):
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    env = environment()["env"]
    assert env["ONEDNN_MAX_CPU_ISA"] == "AVX2" and "XLA_FLAGS" not in env
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            flags = set(f.read().split())
        isa = environment()["cpu"]["isa"]
        assert ("avx2" in isa) == ("avx2" in flags)
