import copy
import csv
import dataclasses
import math
import os

import keras
import keras_tuner
import pytest

from keras_rnnlm.cli.tune import base_config
from keras_rnnlm.cli.tune import run_major_minor_search
from keras_rnnlm.config import ConfigError
from keras_rnnlm.config import ModelConfig
from keras_rnnlm.config import RunConfig
from keras_rnnlm.models import build_language_model
from keras_rnnlm.models.params import count_params
from keras_rnnlm.models.params import solve_sizes
from keras_rnnlm.presets.major_minor_lstm import TABLE_IX
from keras_rnnlm.presets.major_minor_lstm import ratio_preset
from keras_rnnlm.tuning.major_minor import HiddenSizeHyperModel
from keras_rnnlm.tuning.major_minor import MajorMinorHyperModel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
RECIPES = os.path.join(ROOT, "recipes")
BASE_RECIPES = {"ratio": "mmlstm_ptb", "hidden": "awd_lstm_ptb"}


def recipe_path(name):
    return os.path.join(RECIPES, f"{name}.py")


def tiny_overrides(corpus_dir, mmlstm=True):
    """The AWD-LSTM (Table IX ``ratio_10_0``, or ``mmlstm=False``: the
    plain AWD-LSTM) preset, tiny: two layers, the last feeding the tied
    decoder, no AR/TAR (fewer traced ops, a faster test)."""
    overrides = [
        f"data.corpus={corpus_dir}",
        "data.level=word",
        "data.batch_size=4",
        "data.bptt=8",
        "data.eval_batch_size=2",
        "data.eval_bptt=8",
        "data.max_tokens=1200",
        "model.embedding_dim=8",
        "model.hidden_sizes=[20,8]",
        "model.ar_alpha=0",
        "model.tar_beta=0",
        "train.learning_rate=2.0",
        "train.verbose=0",
        "train.tensorboard=false",
    ]
    if mmlstm:
        overrides.append("model.major_proportions=[1.0,1.0]")
    return overrides


def _built(model_config, vocab):
    keras.backend.clear_session()
    model = build_language_model(model_config, vocab, None, stateful=False)
    return sum(math.prod(v.shape) for v in model.trainable_variables)


MODELS = {
    "lstm_softmax": {"hidden_sizes": [12, 10]},
    "lstm_one_hot_wdrop": {
        "input_encoding": "one_hot",
        "hidden_sizes": [9, 7],
        "weight_dropout": 0.3,
    },
    "mmlstm_tied": {
        "cell": "mmlstm",
        "head": "tied",
        "hidden_sizes": [15, 8],
        "major_proportions": [0.7, 0.5],
    },
    "mmlstm_previous_mos": {
        "cell": "mmlstm",
        "minor_input": "previous",
        "head": "mos",
        "mixture_components": 3,
        "hidden_sizes": [11, 9, 6],
        "major_proportions": [0.9, 1.0, 0.6],
    },
    "lstm_doc": {
        "head": "doc",
        "mixture_components": [1, 0, 2],
        "hidden_sizes": [10, 8],
    },
    "gru_built": {"cell": "gru", "hidden_sizes": [6]},
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_count_params_matches_the_built_model(name):
    cfg = ModelConfig(embedding_dim=8, **MODELS[name])
    assert count_params(cfg, 23) == _built(cfg, 23)


@pytest.mark.parametrize("corpus, vocab", [("ptb", 10000), ("wt2", 33278)])
def test_budget_solver_reproduces_table_ix(corpus, vocab):
    base = RunConfig.from_dict(ratio_preset(corpus, 1.0)).model
    budget = count_params(base, vocab)  # the AWD-LSTM, ~24.2M / ~33.5M
    for r, size in TABLE_IX[corpus].items():
        m = dataclasses.replace(base, major_proportions=[r] * 3)
        sizes = solve_sizes(m, vocab, budget, [0, 1]).hidden_sizes
        assert sizes[0] == sizes[1] and sizes[2] == 400
        if corpus == "ptb":
            assert sizes[0] == size  # all six PTB sizes exactly
        else:  # the paper's WT2 sizes vary their counts (33.3M-33.8M)
            assert abs(sizes[0] - size) <= 20
        count = count_params(dataclasses.replace(m, hidden_sizes=sizes), vocab)
        assert abs(count - budget) / budget < 0.005


def test_budget_solver_keeps_ratios_and_checks_limits():
    m = ModelConfig(
        embedding_dim=8,
        hidden_sizes=[40, 40, 20],
        cell="mmlstm",
        major_proportions=[0.5, 0.5, 0.5],
    )
    budget = count_params(
        dataclasses.replace(m, major_proportions=[1.0] * 3), 50
    )
    sizes = solve_sizes(m, 50, budget, [0, 1, 2], step=2).hidden_sizes
    assert sizes[0] == sizes[1] > 40 and sizes[2] == 2 * round(sizes[0] / 4)
    with pytest.raises(ConfigError, match="below"):
        solve_sizes(m, 50, 10, [0])
    with pytest.raises(ConfigError, match="tied"):
        solve_sizes(dataclasses.replace(m, head="tied"), 50, budget, [2])


def test_mmlstm_hypermodel_space_budget_and_deepcopy(tiny_corpus_dir):
    from keras_rnnlm.callbacks import NaNGuard
    from keras_rnnlm.callbacks import ResetStates
    from keras_rnnlm.runs import load_run_corpus

    config = base_config(
        recipe_path("mmlstm_ptb"),
        "ratio_10_0",
        tiny_overrides(tiny_corpus_dir),
    )
    corpus = load_run_corpus(config)
    hm = MajorMinorHyperModel(
        config, corpus, param_budget="base", size_step=2, bptts=(6, 8)
    )
    assert hm.solve_layers == (1,)  # layer 2 feeds the tied decoder
    hp = keras_tuner.HyperParameters()
    hm.declare_hyperparameters(hp)
    trial = hm.run_config(hp, fit=True)
    assert set(hp.values) == {
        "bptt",
        "major_proportion_1",
        "major_proportion_2",
    }
    m = trial.model
    assert m.cell == "mmlstm" and m.major_proportions == [0.5] * 2
    assert m.hidden_sizes[0] > 20 and m.hidden_sizes[1] == 8
    assert trial.data.bptt == 6
    budget = count_params(config.model, len(corpus.vocab))
    assert hm.param_budget == budget

    def miss(size):  # distance to the budget with layer 1 of ``size``
        sized = dataclasses.replace(m, hidden_sizes=[size, 8])
        return abs(count_params(sized, len(corpus.vocab)) - budget)

    s = m.hidden_sizes[0]
    assert miss(s) <= min(miss(s - 2), miss(s + 2))  # the closest
    for k in (1, 2):
        hp.values[f"major_proportion_{k}"] = 1.0
    assert hm.trial_config(hp).model.hidden_sizes == [20, 8]  # 10:0
    row = hm.describe(hp)
    assert row["hidden_sizes"] == "20/8" and row["params"] == budget
    assert row["bptt"] == 6
    # Nothing un-copyable in the hypermodel, a trial's own callbacks or
    # the package's callbacks a search may be given.
    copy.deepcopy(hm)
    copy.deepcopy(hm.trial_callbacks(trial))
    copy.deepcopy([ResetStates(), NaNGuard()])
    shared = MajorMinorHyperModel(
        config, corpus, proportions=(0.8, 0.9), shared_proportion=True
    )
    hp = keras_tuner.HyperParameters()
    assert shared.trial_config(hp).model.major_proportions == [0.8] * 2
    assert set(hp.values) == {"major_proportion"}
    with pytest.raises(ValueError, match="both searched and solved"):
        MajorMinorHyperModel(
            config,
            corpus,
            size_choices={1: [8]},
            param_budget=1,
            solve_layers=[1],
        )
    with pytest.raises(ValueError, match="tied decoder"):
        MajorMinorHyperModel(config, corpus, size_choices={2: [8, 12]})
    with pytest.raises(ValueError, match="needs a param_budget"):
        MajorMinorHyperModel(config, corpus, solve_layers=[1])


def test_hidden_size_hypermodel_space(tiny_corpus_dir):
    from keras_rnnlm.runs import load_run_corpus

    config = base_config(
        recipe_path("awd_lstm_ptb"),
        "cpu",
        tiny_overrides(tiny_corpus_dir, mmlstm=False),
    )
    corpus = load_run_corpus(config)
    hm = HiddenSizeHyperModel(
        config, corpus, layers=(1,), factors=(0.6, 1.0, 1.2)
    )
    assert hm.size_choices == {1: (12, 20, 24)}  # 0.6c..1.2c, c = 20
    hp = keras_tuner.HyperParameters()
    assert hm.trial_config(hp).model.hidden_sizes == [12, 8]
    row = hm.describe(hp)
    assert row["size_1"] == 12 and row["hidden_sizes"] == "12/8"
    assert row["params"] == count_params(
        hm.trial_config(hp).model, len(corpus.vocab)
    )
    with pytest.raises(ValueError, match="tied decoder"):
        HiddenSizeHyperModel(config, corpus, layers=(2,))


class EpochProbe(keras.callbacks.Callback):
    """Records which callback object saw which epoch's ``val_ppl``."""

    seen = []

    def __init__(self):
        super().__init__()
        self.epochs = 0

    def on_epoch_end(self, epoch, logs=None):
        self.epochs += 1
        EpochProbe.seen.append((id(self), "val_ppl" in (logs or {})))


@pytest.mark.slow
def test_ratio_search_end_to_end(tiny_corpus_dir, tmp_path):
    out = tmp_path / "tune"
    argv = ["--preset", "ratio_10_0", "--shared", "--budget", "base"]
    argv += ["--proportions", "0.5", "0.8", "--tuner", "grid", "--bptts", "8"]
    argv += ["--max-trials", "2", "--epochs", "1", "--out", str(out)]
    argv += ["--size-step", "2"]
    for item in tiny_overrides(tiny_corpus_dir):
        argv += ["--set", item]
    probe = EpochProbe()
    EpochProbe.seen.clear()
    rows = run_major_minor_search(
        RECIPES, BASE_RECIPES, argv, callbacks=[probe]
    )
    assert len(rows) == 2
    assert {r["major_proportion_1"] for r in rows} == {0.5, 0.8}
    for r in rows:
        assert r["major_proportion_1"] == r["major_proportion_2"]
        s1, s2 = (int(s) for s in r["hidden_sizes"].split("/"))
        assert s1 > 20 and s2 == 8  # solved to the 10:0 budget
        assert 1.0 < r["val_ppl"] < 100.0  # a tiny vocabulary
        assert r["bptt"] == 8
    # Keras Tuner deep-copied the search callbacks for every trial: the
    # original never ran; two copies each saw val_ppl.
    assert probe.epochs == 0
    assert len({i for i, _ in EpochProbe.seen}) == 2
    assert id(probe) not in {i for i, _ in EpochProbe.seen}
    assert all(has_val for _, has_val in EpochProbe.seen)
    for name in ("results.csv", "results.md", "ppl_vs_ratio.png"):
        assert (out / name).stat().st_size > 0
    with open(out / "results.csv") as f:
        header = next(csv.reader(f))
    assert header[:3] == ["trial", "major_proportion_1", "major_proportion_2"]
    assert {"hidden_sizes", "params", "val_ppl", "bptt"} <= set(header)


def _free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_distributed_search_one_chief_two_workers(tiny_corpus_dir, tmp_path):
    """Keras Tuner's chief/worker mode on localhost (gRPC): the chief
    serves the oracle and writes the results, two workers run the
    trials."""
    import re
    import subprocess
    import sys

    out = tmp_path / "dist"
    cmd = [
        sys.executable,
        os.path.join(ROOT, "recipes", "tune_mmlstm_ratio.py"),
    ]
    cmd += ["--preset", "ratio_10_0", "--shared", "--budget", "base"]
    cmd += ["--proportions", "0.5", "0.8", "--tuner", "grid"]
    cmd += ["--max-trials", "2", "--epochs", "1", "--size-step", "2"]
    cmd += ["--out", str(out)]
    for item in tiny_overrides(tiny_corpus_dir):
        cmd += ["--set", item]
    env = {
        **os.environ,
        "KERASTUNER_ORACLE_IP": "127.0.0.1",
        "KERASTUNER_ORACLE_PORT": str(_free_port()),
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "MPLBACKEND": "Agg",
    }
    procs = {}
    try:
        for tuner_id in ("chief", "tuner0", "tuner1"):
            procs[tuner_id] = subprocess.Popen(
                cmd,
                env={**env, "KERASTUNER_TUNER_ID": tuner_id},
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        logs = {k: p.communicate(timeout=540)[0] for k, p in procs.items()}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
    for tuner_id, p in procs.items():
        assert p.returncode == 0, f"{tuner_id}:\n{logs[tuner_id][-3000:]}"
    ran = [
        int(re.search(r"worker \w+: ran (\d+) trial", logs[w]).group(1))
        for w in ("tuner0", "tuner1")
    ]
    assert sum(ran) == 2  # the workers trained; the chief did not
    with open(out / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2
    assert {float(r["major_proportion_1"]) for r in rows} == {0.5, 0.8}
    assert all(1.0 < float(r["val_ppl"]) < 100.0 for r in rows)
    assert (out / "ppl_vs_ratio.png").stat().st_size > 0
