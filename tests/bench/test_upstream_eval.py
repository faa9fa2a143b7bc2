"""bench/upstream_eval.py without timing anything: upstream's model
(salesforce/awd-lstm-lm's ``model.py``) loaded with a Keras model's
weights, its dictionary in another order, and main.py's ``evaluate``
loop give the Keras model's loss; the records pair each Keras figure
with upstream's."""

import os
import sys
import types

import numpy as np
import pytest
from evaluation_runs import run

from bench import upstream_eval
from keras_rnnlm.config import ModelConfig
from keras_rnnlm.models import build_language_model

REFERENCE = os.path.join(
    os.path.dirname(__file__), "..", "..", "..", "shared", "reference",
    "awd-lstm-lm",
)  # fmt: skip
VOCAB = 30
#: upstream's top-level modules (taken out of sys.modules afterwards).
UPSTREAM_MODULES = (
    "model", "utils", "splitcross", "embed_regularize", "locked_dropout",
    "weight_drop",
)  # fmt: skip


@pytest.fixture
def upstream(monkeypatch):
    """upstream's modules importable, and forgotten after the test."""
    if not os.path.isdir(REFERENCE):
        pytest.skip("no ../shared/reference/awd-lstm-lm")
    monkeypatch.syspath_prepend(os.path.abspath(REFERENCE))
    yield
    for name in UPSTREAM_MODULES:
        sys.modules.pop(name, None)


def test_upstreams_model_with_the_keras_weights_gives_the_keras_loss(
    tmp_path, upstream
):
    torch = pytest.importorskip("torch")
    import model as upmodel  # upstream's
    import utils
    from splitcross import SplitCrossEntropyLoss

    config = ModelConfig(
        embedding_dim=8, hidden_sizes=[12, 12, 8], head="tied",
        rnn_init="pytorch", locked_dropout=True, dropouti=0.4,
        dropouth=0.25, dropoute=0.1, weight_dropout=0.5,
    )  # fmt: skip
    kmodel = build_language_model(config, VOCAB, None, stateful=False, seed=3)
    tokens = [f"w{i}" for i in range(VOCAB)]
    path = str(tmp_path / "weights.npz")
    np.savez(path, **upstream_eval.upstream_arrays(kmodel, tokens))
    order = np.random.default_rng(0).permutation(VOCAB)  # upstream's ids
    corpus = types.SimpleNamespace(
        dictionary=types.SimpleNamespace(idx2word=[tokens[i] for i in order])
    )
    shape = {"emsize": 8, "nhid": 12, "nlayers": 3}
    tmodel = upstream_eval.load_upstream_model(upmodel, corpus, shape, path)

    batch, rows, bptt = 2, 21, 7
    ids = np.random.default_rng(1).integers(0, VOCAB, (batch, rows))
    logits = np.asarray(kmodel(ids[:, :-1]), np.float64)
    z = logits - logits.max(-1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(-1, keepdims=True))
    want = -np.take_along_axis(log_p, ids[:, 1:, None], -1).mean()

    up_id = {int(k): u for u, k in enumerate(order)}
    source = (
        torch.tensor([[up_id[int(k)] for k in row] for row in ids])
        .t()
        .contiguous()
    )  # batchified: (rows, batch)
    criterion = SplitCrossEntropyLoss(8, splits=[], verbose=False)
    nll = upstream_eval.upstream_evaluate(
        tmodel, criterion, utils, source, batch, bptt
    )
    assert nll * rows / (rows - 1) == pytest.approx(want, rel=1e-5)


def test_records_pair_each_keras_figure_with_upstreams():
    args = types.SimpleNamespace(
        splits=["valid"], preset="cpu", isa="default", compile_cache="off"
    )
    shape = {"bptt": 35, "params": 100}
    samples = {
        ("valid", "keras"): [run(1000.0, 5.0), run(3000.0, 5.0)],
        ("valid", "upstream"): [run(1000.0, 5.25, 8.0, 400.0)] * 2,
    }
    recs = {r["name"]: r for r in upstream_eval.records(args, shape, samples)}
    rate = recs["awd_lstm_ptb_cpu_eval_valid_b10"]
    assert (rate["value"], rate["reference"], rate["ratio"]) == (
        2000.0, 1000.0, 2.0,
    )  # fmt: skip
    assert rate["nll_difference"] == pytest.approx(0.25)
    wall = recs["awd_lstm_ptb_cpu_eval_valid_b10_wall"]
    assert (wall["value"], wall["reference"], wall["lower_is_better"]) == (
        10.0, 8.0, True,
    )  # fmt: skip
    assert recs["awd_lstm_ptb_cpu_eval_valid_b10_peak_rss"]["ratio"] == 2.25
    assert rate["compile_cache"] == "off"


def test_a_warm_cache_run_is_its_own_row():
    """Runs timed with the compile cache filled are named apart (their
    own row of the table), and say so."""
    args = types.SimpleNamespace(
        splits=["test"], preset="cpu", isa="default", compile_cache="warm"
    )
    samples = {("test", "keras"): [run(1000.0, 5.0)]}
    recs = upstream_eval.records(args, {"bptt": 35, "params": 1}, samples)
    names = {r["name"] for r in recs}
    assert names == {
        "awd_lstm_ptb_cpu_warm_cache_eval_test_b1",
        "awd_lstm_ptb_cpu_warm_cache_eval_test_b1_wall",
        "awd_lstm_ptb_cpu_warm_cache_eval_test_b1_peak_rss",
    }
    assert {r["compile_cache"] for r in recs} == {"warm"}


def test_a_validation_run_adds_the_trainers_validation_rows():
    args = types.SimpleNamespace(
        splits=["valid"], preset="cpu", isa="default", compile_cache="off",
        validation_passes=3,
    )  # fmt: skip
    validation = {
        "tokens_per_s": 900.0, "first_tokens_per_s": 500.0, "nll": 5.0,
        "pass_seconds": [2, 1, 1], "load_average": 1.0,
    }  # fmt: skip
    samples = {
        ("valid", "keras_validation"): [validation],
        ("valid", "upstream_validation"): [
            {**validation, "tokens_per_s": 1000.0}
        ],
    }
    recs = upstream_eval.records(args, {"bptt": 35, "params": 1}, samples)
    by_name = {r["name"]: r for r in recs}
    assert set(by_name) == {
        "awd_lstm_ptb_cpu_validation_b10",
        "awd_lstm_ptb_cpu_first_validation_b10",
    }
    assert by_name["awd_lstm_ptb_cpu_validation_b10"]["ratio"] == 0.9
    assert by_name["awd_lstm_ptb_cpu_validation_b10"]["reference_name"] == (
        upstream_eval.REFERENCE_NAME
    )
