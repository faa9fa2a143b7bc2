"""Maupomé & Meurs (2019), "Multiplicative Models for Recurrent Language
Modeling": character-level Penn Treebank, bits per character.

    python recipes/mlstm_ptb.py                      # mLSTM, paper size
    python recipes/mlstm_ptb.py --cell mgru --size large

``--cell``: ``mlstm`` (Krause et al.'s multiplicative LSTM, shared
intermediate state), ``tmlstm`` (true mLSTM), ``mgru``, ``tmgru``, ``mrnn``,
or the baselines ``lstm`` / ``gru``. ``--size paper``: one recurrent layer
whose hidden size is solved so that the whole model has ~292K parameters
(Table 1), with the intermediate size equal to the input size (the 50
symbols); ``--size large``: hidden and intermediate sizes 700 (the paper's
"larger mGRU", 2.1M parameters).

Setup (Section 5.1): one-hot input, softmax output, batches of 32 streams,
Adam, 10 epochs, the best epoch on validation kept; no other
regularisation. Not stated in the paper, our choices: truncated BPTT over
windows of 100 characters with the state carried across windows, Adam's
default learning rate 1e-3, global gradient-norm clipping at 5, Keras's
default (Glorot / orthogonal-free) initialisers. Validation with 32 streams,
test with a single stream (batch 1).

BPC = mean natural-log loss / ln 2 over every predicted symbol of the split;
the end of each line is one symbol (``<eos>``) and is counted.

Paper (test BPC, 292K parameters): mLSTM 1.11, tmLSTM 1.09, tmGRU 1.08,
mGRU 1.07; larger mGRU (2.1M) 0.98.
"""

from keras_rnnlm.layers.multiplicative import model_params
from keras_rnnlm.layers.multiplicative import solve_units
from keras_rnnlm.recipe import main
from keras_rnnlm.recipe import preset_name

ALPHABET = 50  # PTB-char: 49 symbols + <eos>
TARGET_PARAMS = 292_000
CELLS = ("mlstm", "tmlstm", "mgru", "tmgru", "mrnn", "lstm", "gru")
SIZES = ("paper", "large")
PAPER_TEST_BPC = {
    "mlstm-paper": 1.11,
    "tmlstm-paper": 1.09,
    "tmgru-paper": 1.08,
    "mgru-paper": 1.07,
    "mgru-large": 0.98,
}


def _preset(cell, size):
    multiplicative = cell not in ("lstm", "gru")
    if size == "paper":
        units = solve_units(cell, TARGET_PARAMS, ALPHABET)
        inter = None  # = the input size (the alphabet)
    else:
        units, inter = 700, 700
    cell_kwargs = {}
    if multiplicative and inter is not None:
        cell_kwargs["intermediate_size"] = inter
    if cell == "gru":
        cell_kwargs["reset_after"] = False  # eq. 19: W_h (r * h)
    name = preset_name(cell=cell, size=size)
    return {
        "name": f"mlstm_ptb-{name}",
        "data": {
            "corpus": "ptb_char",
            "batch_size": 32,
            "bptt": 100,
            "eval_batch_size": 32,
            "test_batch_size": 1,
        },
        "model": {
            "input_encoding": "one_hot",
            "hidden_sizes": [units],
            "cell": cell,
            "cell_kwargs": cell_kwargs,
            "head": "softmax",
            "init_range": None,
        },
        "train": {
            "epochs": 10,
            "optimizer": "adam",
            "learning_rate": 1e-3,
            "clipnorm": 5.0,
            "out_dir": f"runs/mlstm_ptb/{name}",
        },
    }


PRESETS = {
    preset_name(cell=c, size=s): _preset(c, s) for c in CELLS for s in SIZES
}
DEFAULT_PRESET = "mlstm-paper"


def parameter_count(preset):
    """Parameter count of a preset's model, without building it."""
    p = PRESETS[preset]["model"]
    cell = preset.split("-")[0]
    inter = p["cell_kwargs"].get("intermediate_size")
    return model_params(cell, p["hidden_sizes"][0], ALPHABET, inter)


if __name__ == "__main__":
    main(
        PRESETS,
        DEFAULT_PRESET,
        description=__doc__,
        axes={"cell": (CELLS, "mlstm"), "size": (SIZES, "paper")},
    )
