"""AWD-MMLSTM-MoS on PTB: Shuang et al., "Major-Minor Long Short-Term
Memory for Word-Level Language Model", IEEE TNNLS 2020,
doi:10.1109/TNNLS.2019.2947563 (not on arXiv).

    python recipes/mmlstm_ptb.py [--preset NAME] [--set ...]
    keras-rnnlm finetune runs/awd_mmlstm_mos_ptb [--rounds N]

Paper (Table II): 21.3M params: 56.52/54.51 valid/test, finetuned
55.42/53.46, + dynamic evaluation 47.31/46.81.
Presets (keras_rnnlm/presets/major_minor_lstm.py documents every value and
every parameter count against the paper):

* ``paper``: AWD-MMLSTM-MoS, Table IV (days of GPU).
* ``mos_minus``: AWD-LSTM-MoS⁻ (18.8M), the same sizes without Minor LSTMs.
* ``mmlm2``: MMLM-2 (Table VIII), Minor LSTMs read the previous layer;
  with the paper's stated sizes it has 24.4M params, not the 21.7M the
  paper reports; ``mmlm2_1050`` (21.7M) is our guess at the model behind
  that number.
* ``wo_minor_1`` .. ``wo_minor_3``: the ablations of Table X.
* ``ratio_5_5`` .. ``ratio_10_0``: AWD-MMLSTM Major:Minor ratios (Table IX).
* ``cpu``: the documented short-budget mode (small model, 4 epochs,
  NT-ASGD interval 1); its perplexities are NOT comparable with the paper.
"""

from keras_rnnlm.cli import recipe_main
from keras_rnnlm.presets.major_minor_lstm import mmlstm_presets

PRESETS = mmlstm_presets("ptb")
DEFAULT_PRESET = "paper"

if __name__ == "__main__":
    raise SystemExit(recipe_main(PRESETS, DEFAULT_PRESET, __doc__))
