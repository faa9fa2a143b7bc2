"""word2vec (gensim) on a corpus's training split
(:mod:`keras_rnnlm.data.word2vec`)."""

import numpy as np
import pytest
from gensim.models import KeyedVectors

from keras_rnnlm.data.corpus import load_corpus
from keras_rnnlm.data.word2vec import is_binary_path
from keras_rnnlm.data.word2vec import save_word2vec
from keras_rnnlm.data.word2vec import train_word2vec
from keras_rnnlm.data.word2vec import training_sentences


@pytest.fixture(scope="module")
def corpus(tiny_corpus_dir):
    return load_corpus(tiny_corpus_dir, level="word")


def test_sentences_are_the_loaders_lines(corpus, tiny_corpus_dir):
    sentences = training_sentences(corpus)
    with open(f"{tiny_corpus_dir}/train.txt") as f:
        lines = f.read().splitlines()
    assert len(sentences) == len(lines)
    assert all(s[-1] == "<eos>" for s in sentences)
    assert sentences[0][:-1] == lines[0].split()
    flat = [t for s in sentences for t in s]
    assert flat == corpus.vocab.decode(corpus.train)


def test_every_training_word_gets_a_vector(corpus):
    vectors = train_word2vec(corpus, 8, epochs=1)
    assert vectors.vector_size == 8
    seen = set(corpus.vocab.decode(np.unique(corpus.train)))
    assert set(vectors.key_to_index) == seen
    # the vocabulary's <unk> never occurs in this corpus: no vector
    assert set(corpus.vocab.tokens) - seen == {"<unk>"}


def test_seeded_single_worker_training_is_reproducible(corpus):
    a = train_word2vec(corpus, 8, epochs=1, seed=3)
    b = train_word2vec(corpus, 8, epochs=1, seed=3)
    c = train_word2vec(corpus, 8, epochs=1, seed=4)
    assert a.index_to_key == b.index_to_key
    np.testing.assert_array_equal(a.vectors, b.vectors)
    assert not np.allclose(a.vectors, c.vectors)


def test_min_count_drops_rare_words(corpus):
    counts = np.bincount(corpus.train, minlength=len(corpus.vocab))
    threshold = int(np.sort(counts)[len(counts) // 2]) + 1
    vectors = train_word2vec(corpus, 4, epochs=1, min_count=threshold)
    kept = {t for t, n in zip(corpus.vocab.tokens, counts) if n >= threshold}
    assert set(vectors.key_to_index) == kept
    assert 0 < len(kept) < len(corpus.vocab)


def test_bad_arguments(corpus):
    with pytest.raises(ValueError, match="architecture"):
        train_word2vec(corpus, 4, architecture="glove")
    with pytest.raises(ValueError, match="dim"):
        train_word2vec(corpus, 0)


@pytest.mark.parametrize("name", ["w.bin", "w.txt", "w.vec"])
def test_save_by_suffix_round_trips(corpus, tmp_path, name):
    vectors = train_word2vec(corpus, 4, epochs=1)
    path = save_word2vec(vectors, str(tmp_path / "sub" / name))
    binary = is_binary_path(path)
    assert binary == name.endswith(".bin")
    back = KeyedVectors.load_word2vec_format(path, binary=binary)
    assert back.index_to_key == vectors.index_to_key
    np.testing.assert_allclose(back.vectors, vectors.vectors, atol=1e-6)
    assert sorted(p.name for p in (tmp_path / "sub").iterdir()) == [name]
