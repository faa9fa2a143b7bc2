"""AWD-LSTM (Merity, Keskar & Socher 2018, "Regularizing and Optimizing LSTM
Language Models", arXiv:1708.02182) on PTB.

    python recipes/awd_lstm_ptb.py [--preset paper|cpu] [--set ...]
    keras-rnnlm finetune runs/awd_lstm_ptb [--rounds N]

Paper: PTB 24M params: paper 60.0/57.3 valid/test, finetuned (reference code
README) 58.8/56.5.
Presets (paper, cpu): keras_rnnlm/presets/awd_lstm.py describes them.
"""

from keras_rnnlm.cli import recipe_main
from keras_rnnlm.presets.awd_lstm import awd_presets

PRESETS = awd_presets("awd_lstm", "ptb")
DEFAULT_PRESET = "paper"

if __name__ == "__main__":
    raise SystemExit(recipe_main(PRESETS, DEFAULT_PRESET, __doc__))
