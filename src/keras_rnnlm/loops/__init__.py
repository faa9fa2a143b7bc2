"""The compiled-loop machinery under the papers' layers.

How a recurrent layer's time loop is run: the generic scan with a
hand-written reverse pass (``recurrence``), the fused-layer base class
(``fused_recurrence``), concurrent row blocks (``loop_parts``), one
compiled program per bucket of sequence lengths (``time_buckets``), the
multiplicative cells' hand-written training loops
(``multiplicative_backward``) and carried state that survives every
backend's compiled steps (``state``). Nothing here knows a paper; the
layers in :mod:`keras_rnnlm.layers` are built on it.
"""
