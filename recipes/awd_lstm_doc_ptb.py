"""AWD-LSTM-DOC (Takase, Suzuki & Nagata 2018, "Direct Output Connection for a
High-Rank Language Model", arXiv:1808.10143) on PTB.

    python recipes/awd_lstm_doc_ptb.py [--preset paper|cpu] [--set ...]
    keras-rnnlm finetune runs/awd_lstm_doc_ptb [--rounds N]

Paper: PTB 23M params: 54.62/52.87 valid/test, repeated finetuning (fin)
54.12/52.38.
Presets (paper, cpu): keras_rnnlm/presets/awd_lstm.py describes them.
"""

from keras_rnnlm.cli import recipe_main
from keras_rnnlm.presets.awd_lstm import awd_presets

PRESETS = awd_presets("awd_lstm_doc", "ptb")
DEFAULT_PRESET = "paper"

if __name__ == "__main__":
    raise SystemExit(recipe_main(PRESETS, DEFAULT_PRESET, __doc__))
