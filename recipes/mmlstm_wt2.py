"""AWD-MMLSTM-MoS on WikiText-2: Shuang et al., "Major-Minor Long Short-Term
Memory for Word-Level Language Model", IEEE TNNLS 2020,
doi:10.1109/TNNLS.2019.2947563 (not on arXiv).

    python recipes/mmlstm_wt2.py [--preset NAME] [--set ...]
    keras-rnnlm finetune runs/awd_mmlstm_mos_wt2 [--rounds N]

Paper (Table III): 32.3M params: 64.30/61.77 valid/test, finetuned
63.11/60.51, + dynamic evaluation 41.91/40.15.
Presets (keras_rnnlm/presets/major_minor_lstm.py documents every value and
every parameter count against the paper):

* ``paper``: AWD-MMLSTM-MoS, Table IV (days of GPU).
* ``mos_minus``: AWD-LSTM-MoS⁻ (29.4M), the same sizes without Minor LSTMs.
* ``mmlm2``: MMLM-2 (Table VIII, 32.5M), Minor LSTMs read the previous
  layer.
* ``wo_minor_1`` .. ``wo_minor_3``: the ablations of Table X.
* ``ratio_5_5`` .. ``ratio_10_0``: AWD-MMLSTM Major:Minor ratios (Table IX).
* ``cpu``: the documented short-budget mode (small model, 4 epochs,
  NT-ASGD interval 1); its perplexities are NOT comparable with the paper.
"""

from keras_rnnlm.cli import recipe_main
from keras_rnnlm.presets.major_minor_lstm import mmlstm_presets

PRESETS = mmlstm_presets("wt2")
DEFAULT_PRESET = "paper"

if __name__ == "__main__":
    raise SystemExit(recipe_main(PRESETS, DEFAULT_PRESET, __doc__))
