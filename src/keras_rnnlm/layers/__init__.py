"""Layers and cells of keras_rnnlm (all ``keras.ops``, serializable)."""

from keras_rnnlm.layers.lstm import LSTM
from keras_rnnlm.layers.one_hot import OneHot
from keras_rnnlm.layers.tied_embedding import TiedEmbedding

__all__ = ["LSTM", "OneHot", "TiedEmbedding"]
