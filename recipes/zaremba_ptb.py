"""Zaremba, Sutskever & Vinyals (2014), "Recurrent Neural Network
Regularization", arXiv:1409.2329: 2-layer LSTM language models on Penn
Treebank.

    python recipes/zaremba_ptb.py --size small|medium|large
    keras-rnnlm train recipes/zaremba_ptb.py --preset small

Paper (valid/test perplexity): small 120.7/114.5, medium 86.2/82.7,
large 82.2/78.4. Dropout only on non-recurrent connections; all weights
U(-r, r); SGD with global-norm clipping; the learning rate is constant for
``start_epoch`` epochs, then multiplied by ``decay`` every epoch.

Loss scale: the paper's code minimises the cross-entropy summed over the
``bptt`` steps; :func:`keras_rnnlm.presets.zaremba_lstm.zaremba_preset`
sets the exactly equivalent step on the package's mean loss
(``learning_rate = bptt``, ``clipnorm = clip / bptt``).
"""

from keras_rnnlm.cli import recipe_main
from keras_rnnlm.presets.zaremba_lstm import zaremba_preset

#: hidden, bptt, dropout, init range, clip, decay, start epoch, epochs
PRESETS = {
    "small": zaremba_preset(200, 20, 0.0, 0.1, 5.0, 0.5, 4, 13),
    "medium": zaremba_preset(650, 35, 0.5, 0.05, 5.0, 1 / 1.2, 6, 39),
    "large": zaremba_preset(1500, 35, 0.65, 0.04, 10.0, 1 / 1.15, 14, 55),
}
DEFAULT_PRESET = "small"
PAPER = {  # valid, test perplexity
    "small": (120.7, 114.5),
    "medium": (86.2, 82.7),
    "large": (82.2, 78.4),
}

AXES = {"size": (("small", "medium", "large"), "small")}

if __name__ == "__main__":
    raise SystemExit(recipe_main(PRESETS, DEFAULT_PRESET, __doc__, axes=AXES))
