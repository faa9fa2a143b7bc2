"""*On the long-term learning ability of LSTM LMs*, arXiv:2106.08927: a
one-layer LSTM language model on WikiText-2 with the CBOW long-term
context module (``model.context``, :mod:`keras_rnnlm.layers.cbow_context`):
d_t, the weighted mean of the CBOW embeddings of the 101 most recent
words, concatenated to the word embedding before the LSTM.

    python recipes/cbow_wt2.py --size small|large \\
        --weighting none|uniform|positional|idf --level discourse|sentence \\
        [--pretrained FILE|train]
    keras-rnnlm train recipes/cbow_wt2.py --preset small-uniform-discourse

Paper, Table 2 (test perplexity, random embedding init, averaged over 3
runs; discourse-level / sentence-level):

    extension    small          large
    none         117.5 / 142.4  97.6 / 118.0
    uniform      115.8 / 125.8  97.4 / 105.1
    positional   114.4 / 128.6  97.1 / 109.5
    IDF          118.7 / 127.2  97.7 / 107.5

``--pretrained`` starts the word embeddings (both tables with the
module) from word2vec vectors (``model.pretrained_embeddings``): a
word2vec FILE (``keras-rnnlm word2vec --corpus wikitext2 --dim 100 --out
FILE``), or ``train``: gensim word2vec of the embedding size trained on
the training split first, kept in the run directory. The paper does not
say what text its word2vec embeddings were trained on; Table 2's
"pretrained emb. init." figures are ``PAPER_TEST_PPL_PRETRAINED``.

Settings (Section 3.1) and our readings where the paper is silent (loss
scale, decay start, CBOW table size): :mod:`keras_rnnlm.presets.cbow_lstm`.
The IDF weights are computed with gensim over the training split's
articles (:mod:`keras_rnnlm.data.documents`). ``--level sentence``
resets the LSTM state at every sentence start (training and evaluation)
while the CBOW window runs on (:mod:`keras_rnnlm.data.sentences`).
"""

from keras_rnnlm.cli import recipe_main
from keras_rnnlm.presets.cbow_lstm import LEVELS
from keras_rnnlm.presets.cbow_lstm import SIZES
from keras_rnnlm.presets.cbow_lstm import WEIGHTINGS
from keras_rnnlm.presets.cbow_lstm import cbow_presets

PRESETS = cbow_presets()
DEFAULT_PRESET = "small-uniform-discourse"
PAPER_TEST_PPL = {  # (discourse, sentence), random embedding init
    "small-none": (117.5, 142.4),
    "small-uniform": (115.8, 125.8),
    "small-positional": (114.4, 128.6),
    "small-idf": (118.7, 127.2),
    "large-none": (97.6, 118.0),
    "large-uniform": (97.4, 105.1),
    "large-positional": (97.1, 109.5),
    "large-idf": (97.7, 107.5),
}

PAPER_TEST_PPL_PRETRAINED = {  # (discourse, sentence), word2vec init
    "small-none": (111.1, 134.3),
    "small-uniform": (108.7, 117.7),
    "small-positional": (107.8, 121.4),
    "small-idf": (109.3, 118.9),
    "large-none": (93.9, 114.6),
    "large-uniform": (93.1, 99.8),
    "large-positional": (93.1, 104.9),
    "large-idf": (92.8, 100.7),
}

AXES = {
    "size": (tuple(SIZES), "small"),
    "weighting": (WEIGHTINGS, "uniform"),
    "level": (LEVELS, "discourse"),
}

if __name__ == "__main__":
    raise SystemExit(recipe_main(PRESETS, DEFAULT_PRESET, __doc__, axes=AXES))
