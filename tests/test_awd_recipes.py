"""Every AWD-family recipe builds, and its size matches the paper."""

import importlib.util
import pathlib

import pytest

from keras_rnnlm.config import RunConfig
from keras_rnnlm.models import build_language_model

RECIPES = pathlib.Path(__file__).resolve().parents[1] / "recipes"
VOCAB = {"ptb": 10000, "wt2": 33278}
# name: (paper's rounded count in millions, emb, hidden sizes, mixture)
PAPER = {
    "awd_lstm_ptb": (24, 400, [1150, 1150, 400], None),
    "awd_lstm_wt2": (33, 400, [1150, 1150, 400], None),
    "awd_lstm_mos_ptb": (22, 280, [960, 960, 620], [0, 0, 0, 15]),
    "awd_lstm_mos_wt2": (35, 300, [1150, 1150, 650], [0, 0, 0, 15]),
    "awd_lstm_doc_ptb": (23, 280, [960, 960, 620], [0, 0, 5, 15]),
    "awd_lstm_doc_wt2": (37, 300, [1150, 1150, 650], [0, 0, 5, 15]),
}


def _load(name):
    path = RECIPES / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"recipe_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reference_count(vocab, emb, hidden, mixture):
    """Parameters of the PyTorch reference model (two LSTM biases)."""
    n = vocab * emb + vocab  # tied embedding/decoder + decoder bias
    inputs = [emb, *hidden[:-1]]
    for d_in, h in zip(inputs, hidden):
        n += 4 * h * (d_in + h) + 2 * 4 * h
    if mixture:
        dims = [emb, *hidden]
        for d, i in zip(dims, mixture):
            if i:
                n += d * i * emb + i * emb  # Linear + tanh
        n += hidden[-1] * sum(mixture)  # prior, no bias
    return n


@pytest.mark.parametrize("name", sorted(PAPER))
def test_recipe_parameter_count(name):
    module = _load(name)
    assert set(module.PRESETS) == {"paper", "cpu"}
    config = RunConfig.from_dict(module.PRESETS["paper"])
    model = build_language_model(
        config.model, VOCAB[name[-3:]], None, stateful=False
    )
    count = sum(int(v.numpy().size) for v in model.trainable_variables)
    paper_m, emb, hidden, mixture = PAPER[name]
    ref = reference_count(VOCAB[name[-3:]], emb, hidden, mixture)
    # Keras LSTMs have one bias vector (PyTorch two): 4H fewer per layer.
    assert ref - count == 4 * sum(hidden)
    # Within 2% of the paper's (rounded) figure, except MoS PTB: the
    # reference architecture has 21.50M parameters (PyTorch count), which
    # the MoS paper reports as "22M" (2.3% off).
    tolerance = 0.025 if name == "awd_lstm_mos_ptb" else 0.02
    assert abs(count - paper_m * 1e6) / (paper_m * 1e6) < tolerance
    # The short-budget preset builds too.
    cpu = RunConfig.from_dict(module.PRESETS["cpu"])
    assert cpu.train.epochs <= 5
    # WT2 with a mixture head: a prefix of the training split (one ~2 h
    # sitting per core); everything else trains on the whole split.
    budget = name.endswith("wt2") and mixture is not None
    assert cpu.data.max_train_tokens == (250_000 if budget else None)
