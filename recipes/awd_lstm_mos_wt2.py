"""AWD-LSTM-MoS (Yang, Dai, Salakhutdinov & Cohen 2018, "Breaking the Softmax
Bottleneck: A High-Rank RNN Language Model", arXiv:1711.03953) on WT2.

    python recipes/awd_lstm_mos_wt2.py [--preset paper|cpu] [--set ...]
    keras-rnnlm finetune runs/awd_lstm_mos_wt2 [--rounds N]

Paper: WT2 35M params: 63.88/61.45.
Presets (paper, cpu): keras_rnnlm/presets/awd_lstm.py describes them.
"""

from keras_rnnlm.cli import recipe_main
from keras_rnnlm.presets.awd_lstm import awd_presets

PRESETS = awd_presets("awd_lstm_mos", "wt2")
DEFAULT_PRESET = "paper"

if __name__ == "__main__":
    raise SystemExit(recipe_main(PRESETS, DEFAULT_PRESET, __doc__))
