"""Keras Tuner search over Major-Minor LSTM ratios (Table IX, Fig. 6) and
plain LSTM hidden sizes (Figs. 3 and 4) of Shuang et al., "Major-Minor
Long Short-Term Memory for Word-Level Language Model" (IEEE TNNLS 2020,
doi:10.1109/TNNLS.2019.2947563; not on arXiv). Paper (Fig. 6, AWD-MMLSTM
trained 300 epochs, PTB and WT2, perplexities plotted, not tabulated):
validation and test perplexity fall from Major:Minor 5:5 to 9:1 and rise
again at 10:0 (no Minor LSTM); Table IX lists the layer sizes that keep
every ratio at the AWD-LSTM's parameter count (~24.2M on PTB).

    python recipes/tune_mmlstm_ratio.py --preset cpu --max-trials 12 --epochs 3
    # Table IX / Fig. 6: one shared ratio, first two layers solved to the
    # AWD-LSTM's 24.2M parameters (the third feeds the tied decoder):
    python recipes/tune_mmlstm_ratio.py --preset ratio_10_0 --shared \\
        --budget base --tuner grid --epochs 300
    # Figs. 3/4: AWD-LSTM layer 1 from 200 to 1200, or 0.6c to 1.2c:
    python recipes/tune_mmlstm_ratio.py --search hidden --recipe awd_lstm_ptb \\
        --preset paper --layers 1 --sizes 200 400 600 800 1000 1200
    python recipes/tune_mmlstm_ratio.py --search hidden --recipe awd_lstm_ptb \\
        --preset paper --layers 2 --factors 0.6 0.7 0.8 0.9 1.0 1.1 1.2

``--search ratio`` (default) searches the Major proportion of every layer
(``--layers``: which ones; deciles 0.5-1.0, 1.0 = a plain LSTM layer), or
one shared proportion (``--shared``), on a ``recipes/mmlstm_ptb.py``
preset (``--recipe``/``--preset``; an LSTM preset works too, its layers
become MMLSTM layers). ``--budget base|N|none``: keep the parameter count
at the base preset's (``base``, default) or at N by solving the total size
of ``--solve-layers`` (default: every layer not feeding a tied decoder),
a multiple of ``--size-step``, as Table IX does; ``none`` keeps the sizes
(``--sizes``: candidate sizes of the unsolved layers). ``--search
hidden`` searches the sizes of ``--layers`` of a plain model (``--sizes``
or ``--factors`` of the base size c).

Every trial trains the preset for ``--epochs`` epochs (the epoch budget;
fixed BPTT windows, no NT-ASGD or finetuning) and is scored by its best
validation perplexity; ``--max-trials`` is the trial budget. Optional
knobs: ``--learning-rates`` and ``--bptts`` (the latter is a fit-time
hyperparameter). Writes into ``--out``: the Keras Tuner project,
``results.csv`` and ``results.md`` (one row per trial, best first, with
the solved sizes and parameter counts) and ``ppl_vs_ratio.png`` (or
``ppl_vs_size.png``): validation perplexity against the Major proportion
of each searched layer (the size for ``hidden``), every trial a point and
the best per value a line. Re-running with the same ``--out`` continues
the search (``--overwrite`` starts afresh).

Distributed search (Keras Tuner's chief/worker mode; gRPC, the
``grpcio`` package that keras-tuner requires): start the same command
once per process, with the same ``--out`` on a shared file system, and
three environment variables: ``KERASTUNER_ORACLE_IP`` and
``KERASTUNER_ORACLE_PORT``, where the chief serves the oracle (the same
for everyone), and ``KERASTUNER_TUNER_ID``: ``chief`` for the one process
that runs the oracle (it trains nothing and writes the results when the
trial budget is spent), a distinct id per worker (``tuner0``,
``tuner1``, ...; each runs trials, one per accelerator)::

    export KERASTUNER_ORACLE_IP=10.0.0.1 KERASTUNER_ORACLE_PORT=8000
    KERASTUNER_TUNER_ID=chief  python recipes/tune_mmlstm_ratio.py ARGS &
    KERASTUNER_TUNER_ID=tuner0 CUDA_VISIBLE_DEVICES=0 \\
        python recipes/tune_mmlstm_ratio.py ARGS &
    KERASTUNER_TUNER_ID=tuner1 CUDA_VISIBLE_DEVICES=1 \\
        python recipes/tune_mmlstm_ratio.py ARGS &

Only the chief honours ``--overwrite``; workers wait for the chief (they
may start first) and exit when the oracle has no trial left.
"""

import os

from keras_rnnlm.cli.tune import major_minor_search_main

SEARCH = {
    # ``--recipe NAME`` is a file of this directory.
    "recipe_dir": os.path.dirname(os.path.abspath(__file__)),
    # The default ``--recipe`` of each ``--search``.
    "base_recipes": {"ratio": "mmlstm_ptb", "hidden": "awd_lstm_ptb"},
    "preset": "cpu",
    "out": "runs/tune_mmlstm_ratio",
}

if __name__ == "__main__":
    raise SystemExit(major_minor_search_main(description=__doc__, **SEARCH))
