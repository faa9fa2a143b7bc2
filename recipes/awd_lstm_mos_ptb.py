"""AWD-LSTM-MoS (Yang, Dai, Salakhutdinov & Cohen 2018, "Breaking the Softmax
Bottleneck: A High-Rank RNN Language Model", arXiv:1711.03953) on PTB.

    python recipes/awd_lstm_mos_ptb.py [--preset paper|cpu] [--set ...]
    keras-rnnlm finetune runs/awd_lstm_mos_ptb [--rounds N]

Paper: PTB 22M params: 56.54/54.44 valid/test (finetuned).
Presets (paper, cpu): keras_rnnlm/presets/awd_lstm.py describes them.
"""

from keras_rnnlm.cli import recipe_main
from keras_rnnlm.presets.awd_lstm import awd_presets

PRESETS = awd_presets("awd_lstm_mos", "ptb")
DEFAULT_PRESET = "paper"

if __name__ == "__main__":
    raise SystemExit(recipe_main(PRESETS, DEFAULT_PRESET, __doc__))
