"""MMLSTM vs LSTM language models on WikiText-103: Shuang et al.,
"Major-Minor Long Short-Term Memory for Word-Level Language Model", IEEE
TNNLS 2020, doi:10.1109/TNNLS.2019.2947563 (not on arXiv), Tables VI and
VII.

    python recipes/mmlstm_wt103.py [--preset paper|lstm] [--set ...]

Paper (Table VII): LSTM LM 75.4M params, 47.01/47.95 valid/test; MMLSTM
LM 75.0M, 43.45/44.69. Both: embedding 256, two layers, tied decoder, bptt
70, batch 128, 50 epochs, Adam 1e-3, dropout 0.1 on each layer's output,
recurrent weight dropout 0.15, no other AWD regulariser.

* ``paper``: MMLSTM LM, layers [1100, 256], Major proportions [0.9, 0.9]
  (ours: 75.17M params).
* ``lstm``: the LSTM LM baseline, layers [1024, 256] (75.37M).

Table VI gives one "LSTM (MMLSTM) size" (1024 / 1100) and Major
proportions for three layers in a 2-layer model; with a tied decoder the
second layer must output the embedding size, and [1024, 256] /
[1100, 256] (both layers split 90:10) are the only readings that give
Table VII's counts. Not stated by the paper, our choices: locked dropout,
no dropout on the embeddings, fixed (not variable) bptt, global gradient
clipping 0.25 (awd-lstm-lm's default, also with Adam), no weight decay.

* ``paper_sampled`` / ``lstm_sampled``: the same models trained with a
  sampled softmax of 8,192 candidates per step (``model.sampled_softmax``;
  validation, test and the exported model use the full softmax).

The 267,735-word softmax: with the full softmax, per step of 128 x 70 =
8,960 tokens the logits are 8,960 x 267,735 = 2.4e9 float32 values
(9.6 GB; the log-sum-exp's gradient needs as much again), and the tied
decoder costs 2 x 8,960 x 256 x 267,735 = 1.2 TFLOP forward, ~3.7 TFLOP
with the backward pass, about 90% of the step (the two recurrent layers
are ~0.35 TFLOP). 50 epochs are ~576k steps (~2e18 FLOP): an accelerator
with tens of GB of memory; on a smaller one lower ``data.batch_size``
(the logits scale with it). The ``*_sampled`` presets train on
``[target] + 8,192`` candidates drawn from the (add-one) unigram
distribution of the training counts, the logits corrected by
``-log(S Q(w))`` (:mod:`keras_rnnlm.layers.sampled_softmax`): 33x fewer
decoder FLOPs and a 8,960 x 8,193 logit matrix (``python -m
bench.sampled_softmax`` measures the speed-up). The reported perplexity
is always the full softmax's. The corpus (~180 MB) is not downloaded offline.
"""

from keras_rnnlm.cli import recipe_main
from keras_rnnlm.presets.major_minor_lstm import wt103_presets

PRESETS = wt103_presets()
DEFAULT_PRESET = "paper"

if __name__ == "__main__":
    raise SystemExit(recipe_main(PRESETS, DEFAULT_PRESET, __doc__))
