"""Maupomé & Meurs (2019), "Multiplicative Models for Recurrent Language
Modeling", arXiv:1907.00455: character-level Penn Treebank, bits per
character.

    python recipes/mlstm_ptb.py                      # mLSTM, paper size
    python recipes/mlstm_ptb.py --cell mgru --size large

``--cell``: ``mlstm`` (Krause et al.'s multiplicative LSTM, shared
intermediate state), ``tmlstm`` (true mLSTM), ``mgru``, ``tmgru``, ``mrnn``,
or the baselines ``lstm`` / ``gru``. (Not to be confused with the
multi-cell LSTM of ``recipes/multicell_ptb.py``.) ``--size paper``: one
recurrent layer whose hidden size is solved so that the whole model has
~292K parameters (Table 1), intermediate size = input size (the 50
symbols); ``--size large``: hidden and intermediate sizes 700 (the paper's
"larger mGRU", 2.1M parameters, for every cell).

Setup (Section 5.1): one-hot input, softmax output, batches of 32 streams,
Adam, 10 epochs, the best epoch on validation kept, no other
regularisation. Not stated in the paper, our choices: truncated BPTT over
windows of 100 characters with the state carried across windows, Adam's
default learning rate 1e-3, global gradient-norm clipping at 5, Keras's
default initialisers. Validation with 32 streams, test with one stream.

BPC = mean natural-log loss / ln 2 over every predicted symbol of the
split; the end of each line is one symbol (``<eos>``) and is counted.

Paper (test BPC, 292K parameters): mLSTM 1.11, tmLSTM 1.09, tmGRU 1.08,
mGRU 1.07; larger mGRU (2.1M) 0.98.
"""

from keras_rnnlm.cli import recipe_main
from keras_rnnlm.presets import char_lm_presets

CELLS = ("mlstm", "tmlstm", "mgru", "tmgru", "mrnn", "lstm", "gru")
SIZES = {
    "paper": {"params": 292_000},
    "large": {"units": 700, "intermediate_size": 700},
}
PRESETS, PARAMETERS = char_lm_presets(
    "mlstm_ptb",
    "ptb_char",
    CELLS,
    SIZES,
    alphabet=50,  # PTB-char: 49 symbols + <eos>
    batch_size=32,
    bptt=100,
)
DEFAULT_PRESET = "mlstm-paper"
PAPER_TEST_BPC = {
    "mlstm-paper": 1.11,
    "tmlstm-paper": 1.09,
    "tmgru-paper": 1.08,
    "mgru-paper": 1.07,
    "mgru-large": 0.98,
}

AXES = {"cell": (CELLS, "mlstm"), "size": (tuple(SIZES), "paper")}

if __name__ == "__main__":
    raise SystemExit(recipe_main(PRESETS, DEFAULT_PRESET, __doc__, axes=AXES))
