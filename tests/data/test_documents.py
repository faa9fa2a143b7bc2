"""Documents and gensim IDF weights (CBOW context, arXiv:2106.08927)."""

import os

import numpy as np
import pytest

from keras_rnnlm.data.documents import corpus_idf
from keras_rnnlm.data.documents import document_rule
from keras_rnnlm.data.documents import idf_weights
from keras_rnnlm.data.documents import split_documents
from keras_rnnlm.data.vocabulary import Vocabulary

TEXT = [
    "= Alpha =",
    "the cat sat",
    "= = Early life = =",
    "the dog",
    "",
    "= Beta =",
    "a cat ran far",
    "= Gamma =",
    "the end",
]


def _stream():
    tokens = [
        "<eos>",
        "<unk>",
        "=",
        *sorted({w for t in TEXT for w in t.split()} - {"="}),
        "unused",
    ]
    vocab = Vocabulary(tokens)
    ids = []
    for line in TEXT:
        ids += [vocab.token_to_id(w) for w in line.split()] + [vocab.eos_id]
    return vocab, np.array(ids, np.int32)


def test_articles_start_at_top_level_headings():
    vocab, ids = _stream()
    docs = split_documents(ids, vocab, "article")
    words = [vocab.decode(d) for d in docs]
    assert len(docs) == 3
    assert words[0][:4] == ["=", "Alpha", "=", "<eos>"]
    assert "Early" in words[0]  # a section stays in its article
    assert words[1][1] == "Beta" and words[2][1] == "Gamma"
    assert sum(map(len, docs)) == len(ids)
    # a blank line before the first heading belongs to the first article
    lead = np.concatenate([[vocab.eos_id], ids])
    assert [len(d) for d in split_documents(lead, vocab, "article")] == [
        len(docs[0]) + 1,
        len(docs[1]),
        len(docs[2]),
    ]
    lines = split_documents(ids, vocab, "line")
    assert len(lines) == len(TEXT)
    assert document_rule("wikitext2") == "article"
    assert document_rule("ptb") == "line"


def test_gensim_idf_equals_the_direct_formula():
    vocab, ids = _stream()
    docs = split_documents(ids, vocab, "article")
    got = idf_weights(docs, len(vocab))
    n = len(docs)
    for i, token in enumerate(vocab.tokens):
        df = sum(int(np.any(d == i)) for d in docs)
        want = np.log2(n / df) if df else np.log2(n)
        np.testing.assert_allclose(got[i], want, rtol=1e-6, err_msg=token)
    assert got[vocab.eos_id] == 0.0  # in every document
    assert got[vocab.token_to_id("unused")] == np.float32(np.log2(3))


@pytest.mark.skipif(
    not os.environ.get("KERAS_RNNLM_DATA"), reason="needs KERAS_RNNLM_DATA"
)
def test_wikitext2_articles():
    from keras_rnnlm.data.corpus import load_corpus

    corpus = load_corpus("wikitext2", data_dir=os.environ["KERAS_RNNLM_DATA"])
    docs = split_documents(corpus.train, corpus.vocab, "article")
    assert len(docs) == 629  # the 629 "= Title =" lines of the split
    assert corpus.vocab.decode(docs[0][:3]) == ["<eos>", "=", "Valkyria"]
    idf = corpus_idf(corpus)
    assert idf.shape == (len(corpus.vocab),)
    assert idf[corpus.vocab.eos_id] == 0.0
    assert idf.max() == np.float32(np.log2(629))
