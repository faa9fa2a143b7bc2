"""word2vec embeddings trained with gensim on a corpus's training split.

*On the long-term learning ability of LSTM LMs* (arXiv:2106.08927)
initialises its word embeddings either at random or "with pretrained
embeddings obtained via Word2Vec"; it does not say on what text those
were trained. :func:`train_word2vec` trains them on the training split
of the language model's own corpus, with the tokens exactly as the
package's loader gives them (:mod:`keras_rnnlm.data.corpus`: ``<unk>``
where the corpus has it, and one ``<eos>`` at the end of every line), one
gensim sentence per line. With ``min_count=1`` (the default here, not
gensim's 5) every word of the training split gets a vector (so every
word of the vocabulary built from it, except a ``<unk>`` the split never
holds).

The vectors are written in the word2vec format (:func:`save_word2vec`,
binary for a ``.bin`` file name, else text), which
:mod:`keras_rnnlm.models.pretrained` reads back.
"""

import os

from keras_rnnlm.data.documents import split_lines

#: The file suffix read and written in the binary word2vec format.
BINARY_SUFFIX = ".bin"
#: gensim's ``sg``: 0 for CBOW, 1 for skip-gram.
ARCHITECTURES = {"cbow": 0, "skipgram": 1}


def training_sentences(corpus):
    """The training split of ``corpus`` as gensim sentences: one list of
    token strings per line (each ending with its ``<eos>``), or, for a
    corpus without ``<eos>``, the whole split as one sentence (gensim cuts
    sentences at 10,000 tokens)."""
    vocab = corpus.vocab
    tokens = vocab.tokens
    if vocab.eos_id is None:
        pieces = [corpus.train]
    else:
        pieces = split_lines(corpus.train, vocab.eos_id)
    return [[tokens[int(i)] for i in piece] for piece in pieces]


def train_word2vec(
    corpus,
    dim,
    window=5,
    min_count=1,
    epochs=5,
    architecture="cbow",
    seed=1,
    workers=1,
):
    """Trains word2vec (gensim's ``Word2Vec``) on ``corpus``'s training
    split (:func:`training_sentences`) and returns its ``KeyedVectors``.

    Args:
        corpus: a :class:`~keras_rnnlm.data.corpus.Corpus`.
        dim: the vector size.
        window: the word2vec context window.
        min_count: words seen fewer times get no vector.
        epochs: passes over the sentences.
        architecture: ``"cbow"`` or ``"skipgram"``.
        seed: gensim's seed; with ``workers=1`` the vectors are
            reproducible.
        workers: gensim's worker threads.
    """
    from gensim.models import Word2Vec  # gensim loads only when used

    if architecture not in ARCHITECTURES:
        raise ValueError(
            f"architecture must be one of {sorted(ARCHITECTURES)}, got "
            f"{architecture!r}"
        )
    for name, value in (
        ("dim", dim),
        ("window", window),
        ("min_count", min_count),
        ("epochs", epochs),
        ("workers", workers),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    model = Word2Vec(
        sentences=training_sentences(corpus),
        vector_size=dim,
        window=window,
        min_count=min_count,
        epochs=epochs,
        sg=ARCHITECTURES[architecture],
        seed=seed,
        workers=workers,
    )
    return model.wv


def is_binary_path(path):
    """Whether ``path`` names a binary word2vec file (``.bin``)."""
    return str(path).endswith(BINARY_SUFFIX)


def save_word2vec(vectors, path, binary=None):
    """Writes ``vectors`` (gensim ``KeyedVectors``) in the word2vec
    format; ``binary=None``: binary for a ``.bin`` name, else text.
    Written to a temporary name and renamed, so a half-written file is
    never taken for a finished one."""
    if binary is None:
        binary = is_binary_path(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        vectors.save_word2vec_format(tmp, binary=binary)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path
