"""Zaremba, Sutskever & Vinyals (2014), "Recurrent Neural Network
Regularization": 2-layer LSTM language models on Penn Treebank.

    python recipes/zaremba_ptb.py --size small|medium|large

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
what the presets set. (A run with lr 1 on the mean loss learns about 20x
more slowly: validation perplexity 451 after the first epoch instead of
the paper code's ~180.)
"""

from keras_rnnlm.cli import recipe_main


def _preset(hidden, bptt, dropout, init, clip, decay, start, epochs):
    return {
        "name": "zaremba_ptb",
        "data": {
            "corpus": "ptb",
            "batch_size": 20,
            "bptt": bptt,
            "eval_batch_size": 20,
            "test_batch_size": 1,
        },
        "model": {
            "embedding_dim": hidden,
            "hidden_sizes": [hidden, hidden],
            "cell": "lstm",
            "dropout": dropout,
            "init_range": init,
        },
        "train": {
            "epochs": epochs,
            "optimizer": "sgd",
            "learning_rate": 1.0 * bptt,
            "clipnorm": clip / bptt,
            "lr_schedule": {
                "name": "zaremba",
                "decay": decay,
                "start_epoch": start,
            },
            "out_dir": f"runs/zaremba_ptb_{hidden}",
        },
    }


PRESETS = {
    "small": _preset(200, 20, 0.0, 0.1, 5.0, 0.5, 4, 13),
    "medium": _preset(650, 35, 0.5, 0.05, 5.0, 1 / 1.2, 6, 39),
    "large": _preset(1500, 35, 0.65, 0.04, 10.0, 1 / 1.15, 14, 55),
}
DEFAULT_PRESET = "small"

if __name__ == "__main__":
    raise SystemExit(recipe_main(PRESETS, DEFAULT_PRESET, description=__doc__))
