"""The PyTorch reference models the benches compare the package with,
one module a family; each runs the same architecture as the package's
model, and where a bench checks it, with the Keras model's weights:

* :mod:`~bench.reference.zaremba`: embedding -> ``nn.LSTM`` layers ->
  softmax (Zaremba et al. 2014), with Keras weights for scoring;
* :mod:`~bench.reference.awd_lstm`: the AWD-LSTM family (weight-dropped
  LSTMs, locked and embedding dropout, AR/TAR; tied, MoS and DOC heads;
  the Major-Minor LSTM layers of AWD-MMLSTM);
* :mod:`~bench.reference.multicell`: the multi-cell LSTM;
* :mod:`~bench.reference.multiplicative`: the multiplicative cells
  (mRNN, mLSTM, true mLSTM, mGRU, true mGRU) of the character models;
* :mod:`~bench.reference.dynamic_eval`: Krause et al.'s RMS dynamic
  evaluation on a :mod:`~bench.reference.zaremba` model.
* :mod:`~bench.reference.sampling`: text sampled from the Zaremba, AWD
  and character models as pytorch/examples' ``word_language_model/
  generate.py`` samples, with Keras weights.

Each module imports torch: import it only where PyTorch runs (a bench's
torch child).
"""
