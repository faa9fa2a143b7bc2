"""Presets of *On the long-term learning ability of LSTM LMs*
(arXiv:2106.08927): one-layer LSTM language models on WikiText-2, with
or without the CBOW long-term context module (``model.context``).

Section 3.1 of the paper: one LSTM layer; small: embedding 100, hidden
200; large: 280 / 560; dropout 0.5 after the embedding and after the LSTM
(the builder's dropout 0 acts on ``[embedding, d_t]``, dropout 1 on the
LSTM output); every weight U(-0.05, 0.05); SGD, learning rate 1, global
gradient norm clipped at 5, ``x 0.8`` per epoch "starting from epoch 6",
75 epochs; batch 20, 35 unrolled steps; K = 100, alpha = 1.05.

Our readings, where the paper is silent:

* **Loss scale.** The paper trains "with TensorFlow" with exactly the
  settings of TensorFlow's PTB tutorial (Zaremba et al.'s code: learning
  rate 1, clip 5, 35 steps, batch 20, exponential decay after a number
  of epochs), whose loss is the cross-entropy summed over the 35 steps.
  As in :func:`keras_rnnlm.presets.zaremba_lstm.zaremba_preset`, the
  equivalent step on the package's mean loss is ``learning_rate = 35``,
  ``clipnorm = 5 / 35``.
* **Decay start.** "Starting from epoch 6" read as the tutorial's
  ``max_epoch = 6``: epochs 1-6 at the initial rate, then ``x 0.8`` per
  epoch (``lr_schedule = zaremba(decay=0.8, start_epoch=6)``).
* **CBOW table size.** Not given; the CBOW embeddings have the size of
  the LSTM's word embeddings (100 / 280).
* **Level.** ``discourse``: the state is carried along the stream and
  reset at each epoch start (the package's default); ``sentence``: the
  LSTM state is also reset at every sentence start, in training and
  evaluation (``data.state_reset = "sentence"``; a WikiText sentence
  ends at ``.``, ``!``, ``?`` or a line end,
  :mod:`keras_rnnlm.data.sentences`), while the CBOW window runs on
  across sentences (the module's purpose: "sentence-level training,
  where the hidden states are reset to zero after each sentence").
* **Pretrained init.** Not a preset: ``--pretrained FILE|train`` of the
  recipe (``model.pretrained_embeddings``,
  :mod:`keras_rnnlm.training.pretrained`) starts "the word embeddings"
  (both tables with the module) from word2vec vectors; the paper does
  not say what text they were trained on (``train``: the training
  split).
"""

from keras_rnnlm.presets.merge import merge

#: size -> (embedding, hidden), Section 3.1.
SIZES = {"small": (100, 200), "large": (280, 560)}
#: ``none``: the vanilla model; the others: ``model.context.weighting``.
WEIGHTINGS = ("none", "uniform", "positional", "idf")
#: ``discourse``: the state carried along the stream; ``sentence``: the
#: LSTM state also reset at every sentence (``data.state_reset``).
LEVELS = ("discourse", "sentence")
BPTT = 35

COMMON = {
    "data": {
        "corpus": "wikitext2",
        "batch_size": 20,
        "bptt": BPTT,
        "eval_batch_size": 20,
        "test_batch_size": 1,
    },
    "model": {
        "cell": "lstm",
        "head": "softmax",
        "dropout": 0.5,
        "init_range": 0.05,
    },
    "train": {
        "optimizer": "sgd",
        "epochs": 75,
        "learning_rate": 1.0 * BPTT,
        "clipnorm": 5.0 / BPTT,
        "lr_schedule": {"name": "zaremba", "decay": 0.8, "start_epoch": 6},
    },
}


def cbow_preset(size, weighting, level="discourse"):
    """One model of Table 2 (random embedding init)."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    emb, hidden = SIZES[size]
    context = None
    if weighting != "none":
        context = {
            "type": "cbow",
            "weighting": weighting,
            "window": 100,
            "dim": emb,
            "alpha": 1.05,
        }
    name = f"cbow_wt2_{size}_{weighting}_{level}"
    return merge(
        COMMON,
        {
            "name": name,
            "model": {
                "embedding_dim": emb,
                "hidden_sizes": [hidden],
                "context": context,
            },
            "data": {
                "state_reset": "epoch" if level == "discourse" else "sentence"
            },
            "train": {"out_dir": f"runs/{name}"},
        },
    )


def cbow_presets():
    """Every ``size-weighting-level`` preset."""
    return {
        f"{s}-{w}-{lv}": cbow_preset(s, w, lv)
        for s in SIZES
        for w in WEIGHTINGS
        for lv in LEVELS
    }
