"""What the package's fused recurrent layers share.

A *fused* layer (:class:`~keras_rnnlm.layers.lstm.LSTM` and its
weight-dropped subclass,
:class:`~keras_rnnlm.layers.multiplicative.MultiplicativeRNN`,
:class:`~keras_rnnlm.layers.multicell_lstm.MultiCellLSTM`) is a
``keras.layers.RNN`` with two ways of running its time loop:

* the **fast path**: the input projections for the whole sequence as one
  matrix product, then a compiled loop over the recurrent step only, with
  a hand-written backward pass (the loops are in
  :mod:`keras_rnnlm.loops.recurrence`);
* the **generic path**: Keras's per-step loop over the layer's cell.

Both give the same results; the fast path cannot handle every
configuration (a mask, ``go_backwards``, ``unroll``, and what a layer adds
to :meth:`FusedRecurrence.fast_path_blockers`). :class:`FusedRecurrence`
holds the choice between the two (the ``fused`` argument), the runtime
``forward_only`` flag, and :func:`custom_gradient`, the wrapper the fast
loops use to attach their backward passes.

:class:`~keras_rnnlm.layers.major_minor_lstm.MajorMinorLSTM` is not an
RNN layer but two weight-dropped LSTM branches (fused layers); its
``fuse_branches`` choice goes through the same
:func:`resolve_fast_path`.
"""

import keras
from keras import ops

#: The values of ``fused`` every fused layer accepts.
FUSED_MODES = (True, False, "auto")


def resolve_fast_path(mode, blockers, owner, argument="fused"):
    """Whether to take the fast path, given what stands in its way.

    Args:
        mode: ``False`` (never), ``"auto"`` (when ``blockers`` is empty,
            else fall back silently: the results are the same) or ``True``
            (when ``blockers`` is empty, else raise, as Keras's
            ``use_cudnn=True`` does). Any other true value behaves like
            ``"auto"`` (a layer's own fast-path variants).
        blockers: what prevents the fast path, as short phrases
            (``"go_backwards=True"``); empty if nothing does.
        owner: the layer, for the error message.
        argument: the name of the layer's argument that holds ``mode``.

    Raises:
        ValueError: ``mode is True`` and ``blockers`` is not empty.
    """
    if mode is False:
        return False
    if not blockers:
        return True
    if mode is True:
        raise ValueError(
            f"{type(owner).__name__} {owner.name!r}: `{argument}=True` "
            "requires the fused loop, which does not support "
            f"{', '.join(blockers)}. Pass `{argument}='auto'` to fall back "
            "to the per-step loop."
        )
    return False


class ResetCall:
    """The ``call`` of a recurrent layer that takes the sentence-level reset
    mask ``reset`` (batch, time): 1.0 where a sentence starts, where the
    state goes back to its initial value before reading ``sequences[:, t]``
    (the carried state too, at ``t = 0``).

    A call without ``reset`` is the base class's, unchanged. A call with one
    refuses what :meth:`reset_blockers` names (``RESET_REFUSAL`` says how),
    then runs the base ``call`` (``keras.layers.RNN.call`` does the state
    bookkeeping: initial or carried state, stateful assignment,
    ``return_state``) with the mask where ``inner_loop`` reads it
    (``self._reset_mask``). Subclasses implement ``reset_blockers(mask)``
    and read the mask in their ``inner_loop``.
    """

    #: The refusal, formatted with the blockers (a comma-separated list).
    RESET_REFUSAL = "a sentence reset mask does not support {}"

    def reset_blockers(self, mask=None):
        """What a call with a reset mask cannot run (a list of phrases)."""
        raise NotImplementedError

    def loop_blockers(self, mask=None):
        """What none of the package's own time loops (fused or per-step
        with resets) runs: a Keras mask, ``go_backwards``, ``unroll``."""
        blockers = []
        if mask is not None:
            blockers.append("a mask")
        if self.go_backwards:
            blockers.append("go_backwards=True")
        if self.unroll:
            blockers.append("unroll=True")
        return blockers

    def call(
        self,
        sequences,
        initial_state=None,
        mask=None,
        training=False,
        reset=None,
    ):
        if reset is None:
            return super().call(
                sequences,
                initial_state=initial_state,
                mask=mask,
                training=training,
            )
        blockers = self.reset_blockers(mask)
        if blockers:
            raise ValueError(
                f"{type(self).__name__} {self.name!r}: "
                + self.RESET_REFUSAL.format(", ".join(blockers))
            )
        self._reset_mask = reset
        try:
            return super().call(
                sequences, initial_state=initial_state, training=training
            )
        finally:
            self._reset_mask = None


class FusedRecurrence(ResetCall):
    """Mix into a ``keras.layers.RNN`` subclass (first among the bases).

    Provides:

    * ``fused`` (see :func:`resolve_fast_path`), validated, stored and
      saved in the config; a configuration the fast path cannot run is
      rejected when the layer is made with ``fused=True``, a mask when
      the layer is called;
    * ``forward_only``, a runtime mode, not configuration (see
      :func:`keras_rnnlm.loops.recurrence.set_forward_only`);
    * :meth:`inner_loop`, which runs :meth:`fused_inner_loop` (the
      subclass's fast path) or :meth:`generic_inner_loop`;
    * the sentence-level reset mask (``layer(x, reset=r)``, see
      :meth:`call`): a call with one runs :meth:`reset_inner_loop`, the
      subclass's per-step loop with the state reset where sentences
      start.

    A subclass calls :meth:`init_fused` at the end of its ``__init__`` and
    implements :meth:`fused_inner_loop` and :meth:`reset_inner_loop`; it
    extends :meth:`fast_path_blockers` with what else its fast path cannot
    do and :attr:`fused_modes` with its own variants of the fast path.
    """

    #: Accepted values of ``fused``.
    fused_modes = FUSED_MODES

    def init_fused(self, fused):
        """Validates and stores ``fused``; sets ``forward_only = False``."""
        if fused not in self.fused_modes:
            allowed = ", ".join(repr(m) for m in self.fused_modes)
            raise ValueError(
                f"`fused` must be one of {allowed}. Received: {fused!r}"
            )
        self.fused = fused
        # Runtime mode, not configuration: see recurrence.set_forward_only.
        self.forward_only = False
        if fused is True:
            self.use_fast_path(None)  # raises for a configuration blocker

    def fast_path_blockers(self, mask=None):
        """What keeps this call off the fast path (a list of phrases)."""
        return self.loop_blockers(mask)

    def use_fast_path(self, mask=None):
        """Whether a call with ``mask`` takes the fast path (see
        :func:`resolve_fast_path`)."""
        return resolve_fast_path(
            self.fused, self.fast_path_blockers(mask), self
        )

    #: A reset mask runs the fused configuration's per-step loop.
    RESET_REFUSAL = "a reset mask needs the fused configuration; remove {}"

    def reset_blockers(self, mask=None):
        """What a call with a reset mask cannot run: the fast path's
        blockers (see :class:`ResetCall`)."""
        return self.fast_path_blockers(mask)

    def inner_loop(self, sequences, initial_state, mask, training=False):
        reset = getattr(self, "_reset_mask", None)
        if reset is not None:
            return self.reset_inner_loop(
                sequences, initial_state, reset, training
            )
        if self.use_fast_path(mask):
            return self.fused_inner_loop(sequences, initial_state, training)
        return self.generic_inner_loop(sequences, initial_state, mask, training)

    def fused_inner_loop(self, sequences, initial_state, training=False):
        """The fast path; returns ``(last_output, outputs, new_states)``
        as ``keras.layers.RNN.inner_loop`` does."""
        raise NotImplementedError

    def reset_inner_loop(self, sequences, initial_state, reset, training):
        """The loop of a call with a reset mask (see :meth:`call`),
        usually :func:`~keras_rnnlm.loops.recurrence.reset_recurrence`
        over the hoisted input projection; returns ``(last_output,
        outputs, new_states)``."""
        raise NotImplementedError

    def generic_inner_loop(self, sequences, initial_state, mask, training):
        """Keras's per-step loop (the next ``inner_loop`` in the MRO)."""
        return super().inner_loop(sequences, initial_state, mask, training)

    def get_config(self):
        config = super().get_config()
        config["fused"] = self.fused
        return config


def value_of(x):
    """A variable's value (a tensor); anything else unchanged."""
    return x.value if isinstance(x, keras.Variable) else x


def custom_gradient(forward):
    """``keras.ops.custom_gradient`` for the fused loops.

    Every fast loop returns several outputs (the outputs and the final
    states) and has a hand-written backward pass; this wrapper adapts the
    backends' calling conventions once, so that each ``backward`` only
    sees a tuple of output gradients.

    Args:
        forward: ``forward(*args) -> (outputs, backward)`` with ``outputs``
            a tuple of at least two tensors and ``backward(upstream)``
            returning one gradient per argument; ``upstream`` is the tuple
            of the gradients of ``outputs``, every ``None`` (an output the
            loss does not depend on) replaced by zeros.

    Returns:
        ``f(*args) -> outputs``, differentiable through ``backward``.
    """

    @ops.custom_gradient
    def run(*args):
        outputs, backward = forward(*args)

        def grad(*args, upstream=None):
            # The backends call this differently: TensorFlow
            # (tf.custom_gradient) passes one positional gradient per
            # output; JAX (jax.custom_gradient) passes one positional
            # argument, the cotangent tuple shaped like ``outputs``; Keras's
            # torch backend passes the forward's inputs positionally and
            # the gradients as the keyword ``upstream``. Hence the keyword
            # with a None default, and the unpacking when it is not given
            # (``outputs`` has two or more tensors, so a single positional
            # argument can only be JAX's tuple).
            if upstream is None:
                upstream = args[0] if len(args) == 1 else args
            upstream = tuple(
                ops.zeros_like(out) if g is None else g
                for g, out in zip(upstream, outputs)
            )
            return tuple(backward(upstream))

        return outputs, grad

    return run
