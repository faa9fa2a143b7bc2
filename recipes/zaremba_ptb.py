"""Zaremba, Sutskever & Vinyals (2014), "Recurrent Neural Network
Regularization", arXiv:1409.2329: 2-layer LSTM language models on Penn
Treebank.

    python recipes/zaremba_ptb.py --size small|medium|large
    keras-rnnlm train recipes/zaremba_ptb.py --preset small

Paper (valid/test perplexity): small 120.7/114.5, medium 86.2/82.7,
large 82.2/78.4. Dropout only on non-recurrent connections; all weights
U(-r, r); SGD with global-norm clipping; the learning rate is constant for
``start_epoch`` epochs, then multiplied by ``decay`` every epoch.

Loss scale: Zaremba et al.'s code (and TensorFlow's ptb_word_lm) minimise
the cross-entropy *summed over the bptt time steps* and averaged over the
batch, with learning rate 1 and the gradient's global norm clipped at
``clip``. The package's loss is the mean over tokens, i.e. that loss
divided by ``bptt``; the exactly equivalent SGD update with the mean loss
is ``learning_rate = bptt * 1`` and ``clipnorm = clip / bptt``
(``lr * clip(g_sum, c) == (bptt * lr) * clip(g_mean, c / bptt)``), which is
what the presets set (learning rate 1 on the mean loss would take
``bptt`` times smaller steps than the paper's).
"""

from keras_rnnlm.cli import recipe_main
from keras_rnnlm.presets import merge

COMMON = {
    "name": "zaremba_ptb",
    "data": {
        "corpus": "ptb",
        "batch_size": 20,
        "eval_batch_size": 20,
        "test_batch_size": 1,
    },
    "model": {"cell": "lstm"},
    "train": {"optimizer": "sgd", "lr_schedule": {"name": "zaremba"}},
}
# learning_rate = bptt * 1, clipnorm = clip / bptt (see above).
PRESETS = {
    "small": merge(
        COMMON,
        {
            "data": {"bptt": 20},
            "model": {
                "embedding_dim": 200,
                "hidden_sizes": [200, 200],
                "dropout": 0.0,
                "init_range": 0.1,
            },
            "train": {
                "epochs": 13,
                "learning_rate": 20.0,
                "clipnorm": 5.0 / 20,
                "lr_schedule": {"decay": 0.5, "start_epoch": 4},
                "out_dir": "runs/zaremba_ptb_200",
            },
        },
    ),
    "medium": merge(
        COMMON,
        {
            "data": {"bptt": 35},
            "model": {
                "embedding_dim": 650,
                "hidden_sizes": [650, 650],
                "dropout": 0.5,
                "init_range": 0.05,
            },
            "train": {
                "epochs": 39,
                "learning_rate": 35.0,
                "clipnorm": 5.0 / 35,
                "lr_schedule": {"decay": 1 / 1.2, "start_epoch": 6},
                "out_dir": "runs/zaremba_ptb_650",
            },
        },
    ),
    "large": merge(
        COMMON,
        {
            "data": {"bptt": 35},
            "model": {
                "embedding_dim": 1500,
                "hidden_sizes": [1500, 1500],
                "dropout": 0.65,
                "init_range": 0.04,
            },
            "train": {
                "epochs": 55,
                "learning_rate": 35.0,
                "clipnorm": 10.0 / 35,
                "lr_schedule": {"decay": 1 / 1.15, "start_epoch": 14},
                "out_dir": "runs/zaremba_ptb_1500",
            },
        },
    ),
}
DEFAULT_PRESET = "small"
PAPER = {  # valid, test perplexity
    "small": (120.7, 114.5),
    "medium": (86.2, 82.7),
    "large": (82.2, 78.4),
}

if __name__ == "__main__":
    raise SystemExit(
        recipe_main(
            PRESETS,
            DEFAULT_PRESET,
            description=__doc__,
            axes={"size": (("small", "medium", "large"), "small")},
        )
    )
