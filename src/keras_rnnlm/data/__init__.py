"""Corpora, vocabularies and BPTT batching for recurrent language models.

- `registry`: the known benchmark corpora (`CORPORA`, `CorpusSpec`).
- `download`: finding, downloading and verifying corpus files
  (`resolve_corpus_files`, environment variable `KERAS_RNNLM_DATA`).
- `vocabulary`: `Vocabulary` and `build_vocabulary`.
- `corpus`: `load_corpus` and the `Corpus` container of id arrays;
  `read_text_file` (how every corpus file is read) and
  `check_corpus_fits` (whether the splits feed a run's streams).
- `streams`: `batchify`, BPTT windows and the `LMSequence` `PyDataset`.
- `fit_data`: a stream's epoch as `model.fit` reads it on TensorFlow (a
  `tf.data` pipeline without background threads).
"""

from keras_rnnlm.data.corpus import Corpus
from keras_rnnlm.data.corpus import check_corpus_fits
from keras_rnnlm.data.corpus import load_corpus
from keras_rnnlm.data.corpus import read_text_file
from keras_rnnlm.data.corpus import tokenize_line
from keras_rnnlm.data.download import ENV_VAR
from keras_rnnlm.data.download import resolve_corpus_files
from keras_rnnlm.data.download import sha256_file
from keras_rnnlm.data.errors import ChecksumMismatchError
from keras_rnnlm.data.errors import CorpusEncodingError
from keras_rnnlm.data.errors import CorpusNotFoundError
from keras_rnnlm.data.errors import CorpusTooShortError
from keras_rnnlm.data.errors import DataError
from keras_rnnlm.data.errors import EmptyCorpusError
from keras_rnnlm.data.errors import OOVError
from keras_rnnlm.data.errors import UnknownCorpusError
from keras_rnnlm.data.errors import VocabularyFormatError
from keras_rnnlm.data.registry import CORPORA
from keras_rnnlm.data.registry import CorpusSpec
from keras_rnnlm.data.registry import RemoteFile
from keras_rnnlm.data.registry import get_corpus_spec
from keras_rnnlm.data.streams import LMSequence
from keras_rnnlm.data.streams import Window
from keras_rnnlm.data.streams import batchify
from keras_rnnlm.data.streams import fixed_windows
from keras_rnnlm.data.streams import variable_windows
from keras_rnnlm.data.vocabulary import Vocabulary
from keras_rnnlm.data.vocabulary import build_vocabulary

__all__ = [
    "CORPORA",
    "ENV_VAR",
    "ChecksumMismatchError",
    "Corpus",
    "CorpusEncodingError",
    "CorpusNotFoundError",
    "CorpusTooShortError",
    "CorpusSpec",
    "DataError",
    "EmptyCorpusError",
    "LMSequence",
    "OOVError",
    "RemoteFile",
    "UnknownCorpusError",
    "Vocabulary",
    "VocabularyFormatError",
    "Window",
    "batchify",
    "build_vocabulary",
    "check_corpus_fits",
    "fixed_windows",
    "get_corpus_spec",
    "load_corpus",
    "read_text_file",
    "resolve_corpus_files",
    "sha256_file",
    "tokenize_line",
    "variable_windows",
]
