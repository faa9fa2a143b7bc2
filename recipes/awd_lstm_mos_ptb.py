"""AWD-LSTM-MoS (Yang et al. 2018, "Breaking the Softmax Bottleneck") on PTB.

    python recipes/awd_lstm_mos_ptb.py [--preset paper|cpu] [--set ...]
    python -m keras_rnnlm.training.finetune runs/awd_lstm_mos_ptb

Paper: PTB 22M params: 56.54/54.44 valid/test (finetuned).
Presets (keras_rnnlm/presets/awd_lstm.py documents every value):

* ``paper``: the paper / reference-code hyperparameters (days of GPU).
* ``cpu``: the documented short-budget mode (small model, 4 epochs,
  NT-ASGD interval 1); its perplexities are NOT comparable with the paper.
"""

from keras_rnnlm.presets.awd_lstm import awd_presets
from keras_rnnlm.recipe import main

PRESETS = awd_presets("awd_lstm_mos", "ptb")
DEFAULT_PRESET = "paper"

if __name__ == "__main__":
    main(PRESETS, DEFAULT_PRESET, description=__doc__)
