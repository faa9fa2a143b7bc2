"""Cherian, Badola & Padmanabhan, "Multi-cell LSTM Based Neural Language
Model", arXiv:1811.06477: 2-layer multi-cell LSTM language models on Penn
Treebank.

    python recipes/multicell_ptb.py --size small          # 10 cells, max
    python recipes/multicell_ptb.py --size small --variant lstm
    python recipes/multicell_ptb.py --size large --variant 4layers
    keras-rnnlm train recipes/multicell_ptb.py --preset small-emb300

``--size small|medium|large``: 200 / 650 / 1500 units, dropout 0.4 /
0.5 / 0.65, initial learning rate 1 / 1.2 / 1.2; 10 memory cells per
node, ``max`` selection, 2 layers, embedding size = hidden size.
``--variant``: ``lstm`` (the plain LSTM trained identically),
``1layers`` / ``4layers`` (hidden layers), ``emb300`` / ``emb600``
(embedding size). The preset is ``SIZE`` or ``SIZE-VARIANT``
(``--preset large-4layers`` is the same).

Other settings are overrides of the preset (give ``--out`` too, so that
the run does not resume the preset's run directory):

    --set model.cell_kwargs.num_cells=4          # memory cells per node
    --set model.cell_kwargs.strategy=mean        # mean, weighted, random,
                                                 # max, min_max, learnable_max
    --set model.cell_kwargs.output_threshold=0.5 # o_thr of min_max
    --set model.cell_kwargs.initial_cells=linspace  # zeros (the paper),
                                                 # linspace or random
    --set model.hidden_sizes=[200,200,200]       # layers
    --set model.embedding_dim=300

The setup and our choices where the paper is silent (init, clipping, the
loss scale of the learning rate) are documented in
:mod:`keras_rnnlm.presets.multicell_lstm`. Read
``keras_rnnlm/layers/multicell_lstm.py`` before comparing: with the
paper's all-zero initial cells, ``mean``/``max``/``min_max``/``random``
compute exactly a standard LSTM.

Paper (valid/test perplexity): small MLSTM-LM (10 cells, max) 94.5/89.39,
medium 83.88/79.95, large 80.62/77.12; their plain-LSTM replicate of the
small model 103.216/99.19 and of the large one 81.87/77.85 (all in
:data:`PAPER`).
"""

from keras_rnnlm.cli import recipe_main
from keras_rnnlm.presets.multicell_lstm import SIZES
from keras_rnnlm.presets.multicell_lstm import VARIANT_NAMES
from keras_rnnlm.presets.multicell_lstm import multicell_presets

PRESETS = multicell_presets()
DEFAULT_PRESET = "small"
PAPER = {  # valid, test
    "small": (94.5, 89.39),
    "medium": (83.88, 79.95),
    "large": (80.62, 77.12),
    "small-lstm": (103.216, 99.19),
    "large-lstm": (81.87, 77.85),
    "large-1layers": (84.50, 80.91),
    "large-4layers": (91.0, 87.2),
    "small-emb300": (127.21, 123.0),
    "small-emb600": (124.51, 121.4),
    "large-emb300": (102.92, 99.0),
    "large-emb600": (95.07, 92.38),
}

AXES = {"size": (tuple(SIZES), "small"), "variant": (VARIANT_NAMES, None)}

if __name__ == "__main__":
    raise SystemExit(recipe_main(PRESETS, DEFAULT_PRESET, __doc__, axes=AXES))
