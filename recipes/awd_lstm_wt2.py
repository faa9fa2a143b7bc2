"""AWD-LSTM (Merity, Keskar & Socher 2018, "Regularizing and Optimizing LSTM
Language Models", arXiv:1708.02182) on WT2.

    python recipes/awd_lstm_wt2.py [--preset paper|cpu] [--set ...]
    keras-rnnlm finetune runs/awd_lstm_wt2 [--rounds N]

Paper: WT2 33M params: paper 68.6/65.8.
Presets (paper, cpu): keras_rnnlm/presets/awd_lstm.py describes them.
"""

from keras_rnnlm.cli import recipe_main
from keras_rnnlm.presets.awd_lstm import awd_presets

PRESETS = awd_presets("awd_lstm", "wt2")
DEFAULT_PRESET = "paper"

if __name__ == "__main__":
    raise SystemExit(recipe_main(PRESETS, DEFAULT_PRESET, __doc__))
