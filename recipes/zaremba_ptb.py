"""Zaremba, Sutskever & Vinyals (2014), "Recurrent Neural Network
Regularization": 2-layer LSTM language models on Penn Treebank.

    python recipes/zaremba_ptb.py --size small|medium|large

Paper (valid/test perplexity): small 120.7/114.5, medium 86.2/82.7,
large 82.2/78.4. Dropout only on non-recurrent connections; all weights
U(-r, r); SGD with global-norm clipping; the learning rate is constant for
``start_epoch`` epochs, then multiplied by ``decay`` every epoch.
"""

from keras_rnnlm.recipe import main


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
            "learning_rate": 1.0,
            "clipnorm": clip,
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
    main(PRESETS, DEFAULT_PRESET, description=__doc__)
