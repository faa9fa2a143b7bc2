"""``keras-rnnlm word2vec``: word2vec embeddings (gensim) trained on a
corpus's training split, for ``model.pretrained_embeddings``.

    keras-rnnlm word2vec --corpus wikitext2 --dim 100 --out w2v_100d.bin

The tokens are the language model's own (the package's corpus loader:
``<unk>``, one ``<eos>`` per line), one sentence per line
(:mod:`keras_rnnlm.data.word2vec`). *On the long-term learning ability of
LSTM LMs* (arXiv:2106.08927) does not say what text its word2vec
embeddings were trained on; this trains them on the LM's training split.
"""

from keras_rnnlm.cli.train import options_of
from keras_rnnlm.config import ConfigError
from keras_rnnlm.data.corpus import load_corpus
from keras_rnnlm.data.word2vec import is_binary_path
from keras_rnnlm.data.word2vec import save_word2vec
from keras_rnnlm.data.word2vec import train_word2vec


def _positive_int(name, value):
    if value < 1:
        raise ConfigError(f"--{name} must be >= 1, got {value}")
    return value


def run_word2vec(args):
    for name in ("dim", "window", "min_count", "epochs", "workers"):
        _positive_int(name.replace("_", "-"), getattr(args, name))
    corpus = load_corpus(args.corpus, data_dir=args.data_dir, level=args.level)
    vectors = train_word2vec(
        corpus,
        **options_of(args, "dim window min_count epochs seed workers"),
        architecture=args.architecture,
    )
    binary = (
        is_binary_path(args.out)
        if args.format == "auto"
        else (args.format == "binary")
    )
    save_word2vec(vectors, args.out, binary=binary)
    missing = len(corpus.vocab) - sum(
        token in vectors.key_to_index for token in corpus.vocab
    )
    print(
        f"Wrote {len(vectors)} vectors of {args.dim} dimensions "
        f"({'binary' if binary else 'text'}) to {args.out}: word2vec on "
        f"the {len(corpus.train):,} training tokens of {corpus.name}; "
        f"{missing} of {len(corpus.vocab)} vocabulary words have none"
    )
    return 0
