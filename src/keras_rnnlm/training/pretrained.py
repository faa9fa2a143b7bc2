"""A run's pretrained word embeddings: a given word2vec file, or one
trained for the run (``--pretrained FILE|train`` of ``keras-rnnlm
train`` and of recipe files).

:func:`with_pretrained` sets ``model.pretrained_embeddings`` of a config
(:mod:`keras_rnnlm.models.pretrained`); for ``train`` its path is
:func:`run_word2vec_path`, a file in the run directory that
:func:`ensure_run_word2vec` trains once (gensim word2vec of the model's
embedding size on the run's training split,
:func:`~keras_rnnlm.data.word2vec.train_word2vec`, seeded with
``train.seed``) and reuses afterwards.
"""

import dataclasses
import os

from keras_rnnlm.data.word2vec import save_word2vec
from keras_rnnlm.data.word2vec import train_word2vec
from keras_rnnlm.runs import WORD2VEC_FILE
from keras_rnnlm.runs import load_run_corpus
from keras_rnnlm.runs import run_lock
from keras_rnnlm.training.trainer import check_resumable

#: ``--pretrained train``: train word2vec for the run.
TRAIN = "train"


def run_word2vec_path(config):
    """The word2vec file trained for a run: ``word2vec_<dim>d.bin`` in
    its ``train.out_dir``."""
    name = WORD2VEC_FILE.format(dim=config.model.embedding_dim)
    return os.path.join(config.train.out_dir, name)


def with_pretrained(config, source):
    """``config`` with ``model.pretrained_embeddings`` read from
    ``source``: a word2vec file, or ``"train"`` (:func:`run_word2vec_path`).

    The CBOW context table (``model.context``) is initialised too when
    the model has one; ``binary`` and ``cbow`` already set in the config
    (``--set``) are kept."""
    path = run_word2vec_path(config) if source == TRAIN else source
    spec = {
        "cbow": config.model.context is not None,
        **(config.model.pretrained_embeddings or {}),
        "path": path,
    }
    if source == TRAIN:
        spec["binary"] = True
    model = dataclasses.replace(config.model, pretrained_embeddings=spec)
    return config.replace(model=model)


def ensure_run_word2vec(config, corpus=None, resume=True):
    """Trains the run's word2vec file (:func:`run_word2vec_path`) unless
    it exists; returns its path. ``corpus``: the run's corpus, if already
    loaded. With ``resume``, a run directory holding the checkpoint of
    another run is refused first (as :func:`~keras_rnnlm.training.train`
    would), before anything is written there; so is one where a run
    trains (:func:`~keras_rnnlm.runs.run_lock`)."""
    if resume:
        check_resumable(config)
    path = run_word2vec_path(config)
    if os.path.isfile(path):
        print(f"Using the run's word2vec file {path}")
        return path
    os.makedirs(config.train.out_dir, exist_ok=True)
    with run_lock(config.train.out_dir):  # not while a run trains there
        return _train_run_word2vec(config, corpus, path)


def _train_run_word2vec(config, corpus, path):
    corpus = corpus or load_run_corpus(config)
    dim = config.model.embedding_dim
    print(f"Training word2vec ({dim} dimensions) on the training split")
    vectors = train_word2vec(corpus, dim, seed=config.train.seed)
    save_word2vec(vectors, path, binary=True)
    print(f"Wrote {len(vectors)} vectors to {path}")
    return path
