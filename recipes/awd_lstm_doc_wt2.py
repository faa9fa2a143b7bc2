"""AWD-LSTM-DOC (Takase, Suzuki & Nagata 2018, "Direct Output Connection for a
High-Rank Language Model", arXiv:1808.10143) on WT2.

    python recipes/awd_lstm_doc_wt2.py [--preset paper|cpu] [--set ...]
    keras-rnnlm finetune runs/awd_lstm_doc_wt2 [--rounds N]

Paper (Table 8): WT2 37M params: 60.97/58.55, finetuned (fin) 60.29/58.03.
Presets (paper, cpu): keras_rnnlm/presets/awd_lstm.py describes them.
"""

from keras_rnnlm.cli import recipe_main
from keras_rnnlm.presets.awd_lstm import awd_presets

PRESETS = awd_presets("awd_lstm_doc", "wt2")
DEFAULT_PRESET = "paper"

if __name__ == "__main__":
    raise SystemExit(recipe_main(PRESETS, DEFAULT_PRESET, __doc__))
