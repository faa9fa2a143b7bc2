"""Documents of a token stream, and the IDF weights computed over them.

The IDF weighting of the CBOW context module (*On the long-term learning
ability of LSTM LMs*, arXiv:2106.08927; the paper "extracted [the IDF
weights] via gensim") needs documents. Our definition, from the training
id stream (every line ends with ``<eos>``, see
:mod:`keras_rnnlm.data.corpus`):

* **WikiText** (``wikitext2``, ``wikitext103``): a document is an
  article. An article starts at a top-level heading line ``= Title =``
  (first and last token ``=``, the second not ``=``: ``= = Section = =``
  is a section inside the article) and runs to the next one (blank lines
  before the first heading belong to the first article; text there would
  be a document of its own). WikiText-2's training split has 629 such
  headings, hence 629 documents (its paper counts 600 articles: some
  articles hold lines of the heading form).
* **PTB** (and any other corpus): the distributed PTB files have lost the
  Wall Street Journal article boundaries (one sentence a line, articles
  concatenated), so a document is a **line** (a sentence). The document
  frequency is then a sentence frequency: a word's IDF says how many
  sentences it occurs in, which is what the window of ~4-5 PTB sentences
  (K = 100 words) can use.

:func:`idf_weights` computes the IDF with gensim (``Dictionary`` +
``TfidfModel``, reading ``TfidfModel.idfs``), i.e. gensim's default
``idf(w) = log2(N / df(w))`` over ``N`` documents; a word of the
vocabulary that occurs in no training document (never the case for a
vocabulary built on the training split) gets the largest possible value,
``log2(N)`` (as if ``df = 1``). A word in every document (``<eos>``) gets
0.
"""

import numpy as np

#: How the training stream of each registered corpus is cut into
#: documents (:func:`document_rule`).
WIKITEXT_CORPORA = ("wikitext2", "wikitext103")


def document_rule(corpus_name):
    """``"article"`` for the WikiText corpora, ``"line"`` otherwise."""
    return "article" if corpus_name in WIKITEXT_CORPORA else "line"


def split_lines(ids, eos_id):
    """The lines of an id stream: a list of arrays, each ending with its
    ``<eos>`` (a trailing piece without one is a line too)."""
    ids = np.asarray(ids)
    ends = np.flatnonzero(ids == eos_id) + 1
    lines = np.split(ids, ends)
    return [line for line in lines if len(line)]


def _is_article_heading(line, heading_id, eos_id):
    body = line[:-1] if len(line) and line[-1] == eos_id else line
    return (
        len(body) >= 3
        and body[0] == heading_id
        and body[-1] == heading_id
        and body[1] != heading_id
    )


def split_documents(ids, vocab, rule="line"):
    """The documents of an id stream (a list of id arrays).

    Args:
        ids: 1-D id array (e.g. ``corpus.train``).
        vocab: the :class:`~keras_rnnlm.data.vocabulary.Vocabulary` (its
            ``<eos>``; ``=`` for articles).
        rule: ``"line"`` or ``"article"`` (see the module docstring).
    """
    eos_id = vocab.eos_id
    if eos_id is None:
        raise ValueError("splitting documents needs an <eos> token")
    lines = split_lines(ids, eos_id)
    if rule == "line":
        return lines
    if rule != "article":
        raise ValueError(f"rule must be 'line' or 'article', got {rule!r}")
    if "=" not in vocab:
        return [np.concatenate(lines)] if lines else []
    heading = vocab.token_to_id("=")
    docs, current, started = [], [], False
    for line in lines:
        if _is_article_heading(line, heading, eos_id):
            # blank lines before the first heading belong to the article
            if current and (started or any(len(x) > 1 for x in current)):
                docs.append(np.concatenate(current))
                current = []
            started = True
        current.append(line)
    if current:
        docs.append(np.concatenate(current))
    return docs


def idf_weights(documents, vocab_size):
    """gensim's IDF of every id, ``log2(N / df)`` (float32, one per id).

    Args:
        documents: id arrays (:func:`split_documents`).
        vocab_size: the number of ids.
    """
    from gensim.corpora import Dictionary  # gensim loads only for IDF
    from gensim.models import TfidfModel

    dictionary = Dictionary([str(int(i)) for i in doc] for doc in documents)
    model = TfidfModel(dictionary=dictionary)
    n = max(dictionary.num_docs, 1)
    idf = np.full(vocab_size, np.log2(n), np.float64)
    for token, gensim_id in dictionary.token2id.items():
        idf[int(token)] = model.idfs[gensim_id]
    return idf.astype(np.float32)


def corpus_idf(corpus):
    """The IDF of every vocabulary id over the training split's documents
    (the rule of ``corpus.name``, :func:`document_rule`)."""
    docs = split_documents(
        corpus.train, corpus.vocab, document_rule(corpus.name)
    )
    return idf_weights(docs, len(corpus.vocab))
