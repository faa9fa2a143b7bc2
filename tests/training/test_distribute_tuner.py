"""Keras Tuner trials under ``train.distribute = "data_parallel"``.

The trial's model is built and fitted under the data-parallel
distribution of :mod:`keras_rnnlm.training.distribute`: checked in a JAX
subprocess with two virtual CPU devices, against the same trial on one
device. Several processes per trial are a ConfigError.
"""

import json
import os
import textwrap

import keras
import pytest
from tiny_configs import tiny_overrides
from user_process import run_as_user

from keras_rnnlm.cli.tune import base_config
from keras_rnnlm.config import ConfigError
from keras_rnnlm.tuning.multicell import MultiCellHyperModel

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
RECIPE = os.path.join(ROOT, "recipes", "multicell_ptb.py")

# One trial of the multicell search (2 cells, "max"), built and fitted
# for one epoch by the hypermodel; prints the carried state's placement
# and the trial's validation perplexity as JSON.
TRIAL = textwrap.dedent(
    """
    import json, sys
    import keras, keras_tuner
    from keras_rnnlm.cli.tune import base_config
    from keras_rnnlm.runs import load_run_corpus
    from keras_rnnlm.tuning.multicell import MultiCellHyperModel

    recipe, overrides = sys.argv[1], json.loads(sys.argv[2])
    config = base_config(recipe, "small", overrides)
    hm = MultiCellHyperModel(
        config, load_run_corpus(config), cells=(2,), strategies=["max"]
    )
    hp = keras_tuner.HyperParameters()
    model = hm.build(hp)
    history = hm.fit(hp, model, epochs=2)
    # the recurrent layers' carried state (the multicell layer's is not
    # among model.variables)
    states = [
        s.value
        for layer in model._flatten_layers()
        for s in (getattr(layer, "states", None) or ())
    ]
    print(json.dumps({
        "devices": len(keras.distribution.list_devices()),
        "state_shards": [list(s.sharding.shard_shape(s.shape)) for s in states],
        "state_shapes": [list(s.shape) for s in states],
        "val_ppl": [float(x) for x in history.history["val_ppl"]],
    }))
    """
)


def _overrides(corpus_dir, distribute):
    """A tiny multicell search (tests/tuning/test_multicell_tuner.py's)."""
    return [
        *tiny_overrides(corpus_dir, learning_rate=2.0),
        f"train.distribute={distribute}",
    ]


def test_several_processes_per_trial_are_refused(tiny_corpus_dir, monkeypatch):
    monkeypatch.setenv("KERAS_DISTRIBUTION_JOB_ADDRESSES", "127.0.0.1:1")
    monkeypatch.setenv("KERAS_DISTRIBUTION_NUM_PROCESSES", "2")
    monkeypatch.setenv("KERAS_DISTRIBUTION_PROCESS_ID", "0")
    config = base_config(
        RECIPE, "small", _overrides(tiny_corpus_dir, "data_parallel")
    )
    with pytest.raises(ConfigError, match="across trials"):
        MultiCellHyperModel(config, None)


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="the TensorFlow refusal"
)
def test_tensorflow_trials_are_refused(tiny_corpus_dir):
    config = base_config(
        RECIPE, "small", _overrides(tiny_corpus_dir, "data_parallel")
    )
    with pytest.raises(ConfigError, match="KERAS_BACKEND=jax"):
        MultiCellHyperModel(config, None)


def _trial(corpus_dir, distribute):
    proc = run_as_user(
        ["-c", TRIAL, RECIPE, json.dumps(_overrides(corpus_dir, distribute))],
        timeout=900,
        KERAS_BACKEND="jax",
        XLA_FLAGS="--xla_force_host_platform_device_count=2",
        PYTHONPATH=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_trial_is_built_and_fitted_data_parallel(tiny_corpus_dir):
    pytest.importorskip("jax")
    single = _trial(tiny_corpus_dir, "none")
    parallel = _trial(tiny_corpus_dir, "data_parallel")
    assert parallel["devices"] == 2
    # built under the distribution: each device holds half the streams'
    # state (on one device the whole state)
    assert parallel["state_shards"]
    for shard, shape in zip(parallel["state_shards"], parallel["state_shapes"]):
        assert shard == [shape[0] // 2, *shape[1:]]
    assert single["state_shards"] == single["state_shapes"]
    # and fitted under it: the same trial, the same validation
    assert len(parallel["val_ppl"]) == 2
    for a, b in zip(single["val_ppl"], parallel["val_ppl"]):
        assert a == pytest.approx(b, rel=1e-5)
