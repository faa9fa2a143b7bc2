"""Presets of Zaremba, Sutskever & Vinyals, "Recurrent Neural Network
Regularization" (arXiv:1409.2329): 2-layer LSTM language models with
dropout on the non-recurrent connections.

The paper's code minimises the cross-entropy *summed* over the ``bptt``
steps (learning rate 1, global gradient norm clipped at ``clip``); the
package minimises the mean over tokens. :func:`zaremba_preset` sets the
exactly equivalent SGD step on the mean loss: ``learning_rate = bptt``
and ``clipnorm = clip / bptt``, since ``lr * clip(g_sum, c) ==
(bptt * lr) * clip(g_mean, c / bptt)``.
"""

from keras_rnnlm.presets.merge import merge

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


def zaremba_preset(
    hidden, bptt, dropout, init_range, clip, decay, start_epoch, epochs
):
    """One size of the paper (Section 4.1): ``hidden`` units in both
    layers and the embedding, weights U(-init_range, init_range), the
    learning rate constant for ``start_epoch`` epochs, then multiplied by
    ``decay`` every epoch."""
    return merge(
        COMMON,
        {
            "data": {"bptt": bptt},
            "model": {
                "embedding_dim": hidden,
                "hidden_sizes": [hidden, hidden],
                "dropout": dropout,
                "init_range": init_range,
            },
            "train": {
                "epochs": epochs,
                "learning_rate": 1.0 * bptt,
                "clipnorm": clip / bptt,
                "lr_schedule": {"decay": decay, "start_epoch": start_epoch},
                "out_dir": f"runs/zaremba_ptb_{hidden}",
            },
        },
    )
