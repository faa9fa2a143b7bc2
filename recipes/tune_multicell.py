"""Keras Tuner search over the multi-cell LSTM of Cherian, Badola &
Padmanabhan, "Multi-cell LSTM Based Neural Language Model",
arXiv:1811.06477: number of memory cells (the paper's Table 2: 2-50),
selection strategy and the min-max threshold o_thr.

    python recipes/tune_multicell.py --size small --max-trials 12 --epochs 3
    python recipes/tune_multicell.py --tuner grid --strategies max mean \\
        --cells 2 5 10 --set data.max_tokens=100000 --epochs 2

Every trial trains the ``recipes/multicell_ptb.py`` preset of ``--size``
(Algorithm-1 annealing included) for ``--epochs`` epochs with the trial's
hyperparameters and is scored by its best validation perplexity. Writes
into ``--out``: the Keras Tuner project, ``results.csv`` and
``results.md`` (one row per trial, best first) and ``ppl_vs_cells.png``
(validation perplexity against the number of cells, one line per
strategy; the paper's Table 2 is the large model with max pooling, ~40
epochs). Re-running with the same ``--out`` continues the search
(``--overwrite`` starts afresh).
"""

import os

from keras_rnnlm.cli.tune import multicell_search_main

SEARCH = {
    "base_recipe": os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "multicell_ptb.py"
    ),
    "size": "small",  # the default ``--size``: the base recipe's preset
    "out": "runs/tune_multicell",
}

if __name__ == "__main__":
    raise SystemExit(multicell_search_main(description=__doc__, **SEARCH))
