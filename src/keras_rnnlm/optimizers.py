"""SGD whose global-norm clipping measures the dense gradient, applied on
TensorFlow as one fused kernel per variable.

``keras.optimizers.SGD(global_clipnorm=c)`` differs from the papers'
reference code (PyTorch's ``clip_grad_norm_`` then ``SGD.step``) in one
number, and is slower than it:

* **The norm.** An embedding's gradient on TensorFlow is a
  ``tf.IndexedSlices`` with one row per token *occurrence*; Keras squares
  and sums those rows, so a token seen k times in a batch adds the sum of
  its k rows' squared norms, not the squared norm of their sum, which is
  what the dense gradient (and PyTorch) has. Models with an untied
  embedding trained with SGD (the Zaremba and multi-cell LSTM presets)
  were clipped by a different scale than the reference code. Here the
  rows of a token are added up first (:func:`global_norm`), as the dense
  gradient has them.
* **The passes.** Keras squares each gradient into a new tensor, scales
  every gradient by the clipping factor into another, multiplies it by
  the learning rate into a third, and subtracts. Here each squared norm
  is one ``L2Loss`` kernel, and, for plain SGD on TensorFlow, the update
  is one ``ResourceApplyGradientDescent`` per variable with the learning
  rate times the clipping factor as its step: the gradient is read once.
  Measured, one optimizer step of the Zaremba small LSTM's 4.65M
  parameters on a 2-core machine (``python -m bench.scaling --sizes
  small --repeats 2``, its ``optimizer`` part): 5.78 ms at one thread
  and 5.82 ms at two with Keras's SGD, 3.66 and 2.86 ms with this one
  (PyTorch: 1.6-2.1 and 1.2-1.8 ms).

* **The decay.** Keras's weight decay (``w -= w * wd * lr``) is three
  more passes over every weight a step, run beside the forward pass.
  Here, when the optimizer has a ``weight_decay``, the decay and the
  step of every decayed weight are one XLA program a step, which reads
  each weight and its gradient once and writes the weight once (a
  sparse gradient's rows are then subtracted by a scatter). Measured,
  the optimizer part of an AWD-LSTM ``cpu`` step (4.7M weights, wd
  1.2e-6, clipping; ``python -m bench.awd_profile --preset cpu --models
  awd_lstm --threads 1 --repeats 20``) on a 2-core Intel Xeon (AVX-512):
  13.3 ms with Keras's decay, 2.7 ms as one program (PyTorch: 6.9-7.6).

The arithmetic is SGD's: weight decay as Keras applies it (``w - w * wd
* lr``, before the step), then ``w -= (lr * scale) * g`` with ``scale =
min(1, clipnorm / norm)`` (a NaN or infinite norm makes it NaN, as in
Keras); this is PyTorch's coupled L2 (``g + wd * w``) to round-off.
Momentum, gradient accumulation, EMA and ``tf.distribute`` strategies
take Keras's own path (with the dense norm).
"""

import keras
from keras import backend
from keras import ops


def _dense_rows(grad):
    """TensorFlow: a ``tf.IndexedSlices`` gradient's rows with repeated
    indices added up (the dense gradient's nonzero rows)."""
    import tensorflow as tf  # TensorFlow backend only (IndexedSlices)

    unique, position = tf.unique(grad.indices)
    return tf.math.unsorted_segment_sum(
        grad.values, position, tf.shape(unique)[0]
    )


def _squared_norm(grad):
    if backend.backend() != "tensorflow":
        return ops.sum(ops.square(ops.cast(grad, "float32")))
    import tensorflow as tf  # TensorFlow backend only

    if isinstance(grad, tf.IndexedSlices):
        grad = _dense_rows(grad)
    return 2.0 * tf.nn.l2_loss(tf.cast(grad, tf.float32))


def global_norm(grads):
    """The L2 norm of the dense gradients ``grads`` (``None`` skipped)
    together, as PyTorch's ``clip_grad_norm_`` measures it."""
    squares = [_squared_norm(g) for g in grads if g is not None]
    return ops.sqrt(ops.sum(ops.stack(squares)))


def clip_scale(grads, clipnorm):
    """``min(1, clipnorm / norm)`` of :func:`global_norm`, NaN where the
    norm is not finite (Keras's rule)."""
    norm = global_norm(grads)
    finite = clipnorm * ops.minimum(1.0 / norm, 1.0 / clipnorm)
    return finite + (norm - norm)


def _scaled(grad, scale):
    if backend.backend() == "tensorflow":
        import tensorflow as tf  # TensorFlow backend only

        if isinstance(grad, tf.IndexedSlices):
            return tf.IndexedSlices(
                grad.values * ops.cast(scale, grad.values.dtype),
                grad.indices,
                grad.dense_shape,
            )
    return grad * ops.cast(scale, grad.dtype)


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class SGD(keras.optimizers.SGD):
    """``keras.optimizers.SGD`` with the dense gradient's norm for
    ``global_clipnorm`` and, for plain SGD on TensorFlow, one fused update
    kernel per variable (see the module doc). Same arguments, same
    config, same variables."""

    def _fused(self):
        if backend.backend() != "tensorflow":
            return False
        import tensorflow as tf  # TensorFlow backend only

        return not (
            self.momentum
            or self.gradient_accumulation_steps
            or self.use_ema
            or tf.distribute.has_strategy()
        )

    def _clip_gradients(self, grads):
        if not (self.global_clipnorm and self.global_clipnorm > 0):
            return super()._clip_gradients(grads)
        scale = clip_scale(grads, self.global_clipnorm)
        return [None if g is None else _scaled(g, scale) for g in grads]

    def _backend_apply_gradients(self, grads, trainable_variables):
        if not self._fused():
            return super()._backend_apply_gradients(grads, trainable_variables)
        import tensorflow as tf  # TensorFlow backend only (_fused)

        step = tf.cast(self.learning_rate, tf.float32)
        if self.global_clipnorm and self.global_clipnorm > 0:
            step = step * clip_scale(grads, self.global_clipnorm)
        elif self.clipnorm or self.clipvalue:
            grads = super()._clip_gradients(grads)
        pairs = []
        for grad, variable in zip(grads, trainable_variables):
            var = variable
            if isinstance(variable, keras.Variable):
                var = variable.value  # the tf.Variable
            pairs.append((grad, var, self._decays(variable)))
        decayed = [(g, v) for g, v, d in pairs if d]
        if decayed:
            self._decayed_steps(decayed, step)
        for grad, var, decays in pairs:
            alpha = tf.cast(step, var.dtype)
            if isinstance(grad, tf.IndexedSlices):
                var.scatter_sub(
                    tf.IndexedSlices(
                        tf.cast(grad.values, var.dtype) * alpha,
                        grad.indices,
                        grad.dense_shape,
                    )
                )
            elif not decays:
                delta = tf.cast(grad, var.dtype)
                tf.raw_ops.ResourceApplyGradientDescent(
                    var=var.handle, alpha=alpha, delta=delta
                )

    def _decays(self, variable):
        return bool(self.weight_decay) and self._use_weight_decay(variable)

    def _decayed_steps(self, pairs, step):
        """Weight decay and, for a dense gradient, the step, of the
        ``(grad, tf.Variable)`` pairs, as one XLA program: each weight is
        read and written once (``w - w * wd * lr - step * g``, the order
        of Keras's decay then the step). A ``tf.IndexedSlices`` gradient's
        rows are subtracted after it."""
        import tensorflow as tf  # TensorFlow backend only (_fused)

        variables = tuple(v for _, v in pairs)
        sparse = tuple(isinstance(g, tf.IndexedSlices) for g, _ in pairs)
        key = (tuple(id(v) for v in variables), sparse)
        # One program per set of weights, kept across the retracings of
        # the training step (a new window length retraces it); in the
        # instance's __dict__, outside Keras's attribute tracking.
        programs = self.__dict__.setdefault("_decay_programs", {})
        if key not in programs:

            def program(grads, lr, wd, step):
                dense = iter(grads)
                for var, is_sparse in zip(variables, sparse):
                    w = var.read_value()
                    dt = w.dtype
                    w = w - w * tf.cast(wd, dt) * tf.cast(lr, dt)
                    if not is_sparse:
                        w = w - tf.cast(step, dt) * tf.cast(next(dense), dt)
                    var.assign(w)

            programs[key] = tf.function(
                program, jit_compile=True, autograph=False
            )
        programs[key](
            [g for g, _ in pairs if not isinstance(g, tf.IndexedSlices)],
            tf.cast(self.learning_rate, tf.float32),
            tf.cast(self.weight_decay, tf.float32),
            tf.cast(step, tf.float32),
        )
