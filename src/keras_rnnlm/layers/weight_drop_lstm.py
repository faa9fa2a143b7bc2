"""LSTM with DropConnect on the recurrent kernel (AWD-LSTM's WeightDrop).

Merity, Keskar & Socher (2018), "Regularizing and Optimizing LSTM Language
Models", Sec. 2: the hidden-to-hidden matrix ``U`` (Keras:
``recurrent_kernel``, shape ``(units, 4 * units)``) is multiplied
elementwise by a Bernoulli(1 - p) mask scaled by ``1 / (1 - p)``:

    U~ = U * m / (1 - p),  m_ij ~ Bernoulli(1 - p)

The mask is drawn ONCE per forward call (per training batch) and shared by
every time step and every sequence of the batch; the raw weights ``U`` are
the trained variables (gradients flow through the mask); at inference the
raw ``U`` is used. Only the recurrent kernel is dropped.

The dropped kernel is computed once, before the time loop, and handed to
the fused recurrence of :class:`keras_rnnlm.layers.LSTM` (via its
``recurrent_kernel_for_call`` hook), so the fast path is kept. This is not
Keras's ``recurrent_dropout`` (which drops the state, draws per call and
forces the slow per-step loop).
"""

import keras
from keras import ops

from keras_rnnlm.layers.lstm import LSTM


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class WeightDropLSTM(LSTM):
    """Fused LSTM with weight-dropped (DropConnect) recurrent kernel.

    Args:
        units: Positive integer, dimensionality of the output space.
        weight_dropout: Float in [0, 1), the DropConnect rate ``p`` on the
            recurrent kernel (AWD-LSTM ``wdrop``, 0.5).
        seed: Seed of the mask's ``keras.random.SeedGenerator``.
        **kwargs: Every argument of :class:`keras_rnnlm.layers.LSTM`
            (``fused=False`` is not allowed: the generic Keras cell loop
            cannot take a per-call kernel).

    Call arguments:
        inputs: ``(batch, time, features)``.
        training: draw and apply a mask (``True``) or use the raw kernel.

    Example:

    >>> layer = WeightDropLSTM(8, weight_dropout=0.5, return_sequences=True)
    >>> layer(np.zeros((2, 5, 3), "float32"), training=True).shape
    (2, 5, 8)
    """

    def __init__(self, units, weight_dropout=0.0, seed=None, **kwargs):
        super().__init__(units, **kwargs)
        if not 0.0 <= weight_dropout < 1.0:
            raise ValueError(
                f"weight_dropout must be in [0, 1), got {weight_dropout}"
            )
        if self.fused is False:
            raise ValueError("WeightDropLSTM needs the fused path (fused!=0)")
        self.weight_dropout = float(weight_dropout)
        self.seed = seed
        self.weight_drop_seed_generator = keras.random.SeedGenerator(seed)

    def recurrent_kernel_for_call(self, training=False):
        kernel = self.cell.recurrent_kernel
        if not training or not self.weight_dropout:
            return kernel
        return keras.random.dropout(
            ops.convert_to_tensor(kernel),
            self.weight_dropout,
            seed=self.weight_drop_seed_generator,
        )

    def inner_loop(self, sequences, initial_state, mask, training=False):
        if training and self.weight_dropout:
            blockers = self.fast_path_blockers(mask)
            if blockers:
                raise ValueError(
                    "WeightDropLSTM cannot apply weight drop on the generic "
                    f"path; remove {', '.join(blockers)}."
                )
        return super().inner_loop(sequences, initial_state, mask, training)

    def get_config(self):
        config = super().get_config()
        config.update(weight_dropout=self.weight_dropout, seed=self.seed)
        return config
