"""The stateless inference graph: tokens and recurrent state in and out.

Training and evaluation models keep their recurrent state in stateful
layers (non-trainable variables with a fixed batch size). Scoring, streaming
and serving need the opposite: a model that holds no state, takes the state
as an input and returns the new state as an output, so that one graph serves
any number of independent requests.

:func:`build_inference_model` derives that graph from any model the builder
makes, without knowing which layers it holds: it re-runs the model's
functional graph (as ``keras.models.clone_model`` does with a
``call_function``),
sharing every non-recurrent layer (embeddings, dropouts, heads) with the
source model and replacing each recurrent layer by a twin built from the
layer's own config with ``return_state=True, stateful=False``, whose weights
are copied from the source layer.

What a recurrent layer must provide (every ``keras.layers.RNN`` subclass
does -- the package's fused ``LSTM``, ``MultiplicativeRNN``, Keras's
``LSTM``/``GRU``/``SimpleRNN`` -- and any layer registered later must too):

* ``get_config()`` / ``from_config()`` round-trip with the keys
  ``return_state`` and ``stateful`` (the twin is
  ``cls.from_config({**config, "return_state": True, "stateful": False})``);
* ``get_initial_state(batch_size)`` returning the list of zero states, each
  of shape ``(batch, ...)``;
* ``call(x, initial_state=[...])`` starting from those states, returning
  ``(outputs, *final_states)`` when ``return_state`` is set;
* the same weights, in the same order (``get_weights``), as its twin;
* optionally ``state_kinds``, one entry per state: ``"recurrent"`` (the
  default: any float32 values) or ``"token_ids"`` (float32 token ids, whole
  numbers in ``[-1, vocab_size)`` with ``-1`` for "no word": the last
  ``K`` words of :class:`~keras_rnnlm.layers.cbow_context.CBOWContext`),
  which the export checks on its streaming inputs.

The recurrent layers are those of
:func:`~keras_rnnlm.models.state.outer_recurrent_layers`, the ones
:func:`~keras_rnnlm.models.state.reset_states` resets: instances of
``keras.layers.RNN`` or any layer with ``get_initial_state`` whose config
has ``return_state`` (e.g.
:class:`~keras_rnnlm.layers.major_minor_lstm.MajorMinorLSTM`, which holds
two LSTMs: recurrent layers inside a recurrent layer are its own business
and get no twin).
"""

import keras
import numpy as np
from keras import ops

from keras_rnnlm.cache_pointer import cache_keys
from keras_rnnlm.loops.recurrence import set_forward_only

# is_recurrent_layer: also keras_rnnlm.scoring.is_recurrent_layer.
from keras_rnnlm.models.state import is_recurrent_layer  # noqa: F401
from keras_rnnlm.models.state import outer_recurrent_layers

STATE_PREFIX = "state"
#: What a state tensor holds (``InferenceModel.state_kinds``).
STATE_KINDS = ("recurrent", "token_ids")


class GatherPositions(keras.layers.Layer):
    """``(batch, time, ...)`` -> ``(1, n, ...)``: the rows of the
    flattened ``(batch * time, ...)`` tensor at ``positions`` (int32
    ``(n,)``), as one sequence of ``n`` steps for the position-wise head.
    """

    def call(self, x, positions):
        flat = ops.reshape(x, (-1, *x.shape[2:]))
        return ops.expand_dims(ops.take(flat, positions, axis=0), 0)

    def compute_output_spec(self, x, positions):
        return keras.KerasTensor((1, None, *x.shape[2:]), dtype=x.dtype)


def _twin(layer, portable=False):
    config = layer.get_config()
    config.update(return_state=True, stateful=False)
    if portable and "fused" in config:
        # The package's layers then run Keras's generic loop (a plain
        # tf.while_loop) instead of their XLA-compiled fused loop.
        config["fused"] = False
    if "use_cudnn" in config:
        # No cuDNN-only ops in an inference graph (CPU servers).
        config["use_cudnn"] = False
    return layer.__class__.from_config(config)


def _initial_values(layer):
    """Per-example initial states of the layer (NumPy float32, without the
    batch axis): zeros for most layers, but e.g. a multi-cell LSTM may
    start its cells from distinct values."""
    states = layer.get_initial_state(1)
    if not isinstance(states, (list, tuple)):
        states = [states]
    return [
        np.asarray(keras.ops.convert_to_numpy(s), np.float32)[0] for s in states
    ]


def _state_kinds(layer, count):
    """The layer's ``state_kinds`` (default: ``"recurrent"`` for each of
    its ``count`` states), checked."""
    kinds = tuple(getattr(layer, "state_kinds", ("recurrent",) * count))
    if len(kinds) != count or not set(kinds) <= set(STATE_KINDS):
        raise ValueError(
            f"Layer {layer.name!r} has {count} state(s) but state_kinds "
            f"{kinds!r}; each must be one of {STATE_KINDS}"
        )
    return kinds


class InferenceModel:
    """A stateless language model with explicit recurrent state.

    The output head (every layer after the last recurrent layer: dropouts,
    AR/TAR, MoS/DOC, the decoder) is position-wise, so the graph runs it
    only at the positions asked for: a padded batch of sentences pays the
    vocabulary-sized decoder for its real tokens only (about half of a
    word-level model's work at every padded position; PTB batches of 32
    sentences are more than half padding).

    Attributes:
        model: functional ``keras.Model`` taking ``[tokens, positions,
            *states]`` (int32 ``(batch, time)``, int32 ``(n,)`` flat
            indices into ``batch * time`` and one float32 tensor per state)
            and returning ``[logits, *final_states]`` with ``logits`` of
            shape ``(1, n, vocab)``: the logits at ``positions``.
        state_names: one name per state tensor (``state_{layer}_{k}``).
        state_shapes: the per-example shape of each state tensor.
        vocab_size: size of the output distribution.
        portable: built without XLA-compiled functions (see
            :func:`build_inference_model`).
        initial_values: the per-example initial value of each state
            (``None``: zeros), what the recurrent layers start from.
        state_kinds: what each state holds, one of :data:`STATE_KINDS`
            (``None``: all ``"recurrent"``); ``"token_ids"`` states (a
            CBOW context's last ``K`` ids) are float32 whole numbers in
            ``[-1, vocab_size)``.
        twins: ``(source layer, twin)`` of every recurrent layer, what
            :meth:`update_weights` copies.
    """

    def __init__(
        self,
        model,
        state_names,
        state_shapes,
        vocab_size,
        portable=False,
        initial_values=None,
        state_kinds=None,
        twins=(),
    ):
        self.model = model
        self.twins = list(twins)
        self.state_names = list(state_names)
        self.state_shapes = [tuple(s) for s in state_shapes]
        self.vocab_size = int(vocab_size)
        self.portable = bool(portable)
        if initial_values is None:
            initial_values = [np.zeros(s, np.float32) for s in state_shapes]
        self.initial_values = [
            np.asarray(v, np.float32) for v in initial_values
        ]
        if state_kinds is None:
            state_kinds = ["recurrent"] * len(self.state_names)
        self.state_kinds = list(state_kinds)
        if len(self.state_kinds) != len(self.state_names) or not set(
            self.state_kinds
        ) <= set(STATE_KINDS):
            raise ValueError(
                f"state_kinds {self.state_kinds} must give one of "
                f"{STATE_KINDS} per state {self.state_names}"
            )

    def update_weights(self):
        """Copies the source model's recurrent weights into their twins
        again (after the source's weights changed; the other layers are
        the source's own)."""
        for layer, twin in self.twins:
            twin.set_weights(layer.get_weights())

    @property
    def keyed_model(self):
        """The graph with the cache keys (the last recurrent layer's output
        sequence, ``(batch, time, key_dim)``: what the output head reads,
        see :mod:`keras_rnnlm.cache_pointer`) as a second
        output: ``[logits, keys, *final_states]``, sharing the layers."""
        keyed = getattr(self, "_keyed", None)
        if keyed is None:
            keys = cache_keys(self.model)
            out = self.model.outputs
            keyed = keras.Model(self.model.inputs, [out[0], keys, *out[1:]])
            self._keyed = keyed
        return keyed

    @property
    def key_dim(self):
        """The size of a cache key (see :attr:`keyed_model`)."""
        return int(self.keyed_model.outputs[1].shape[-1])

    def with_keys(self, tokens, states):
        """Like :meth:`__call__`, also returning the keys: ``(logits
        (batch, time, vocab), keys (batch, time, key_dim), new_states)``."""
        tokens = ops.convert_to_tensor(tokens, "int32")
        shape = ops.shape(tokens)
        positions = ops.arange(shape[0] * shape[1], dtype="int32")
        states = [ops.convert_to_tensor(s, "float32") for s in states]
        out = self.keyed_model([tokens, positions, *states], training=False)
        logits = ops.reshape(out[0][0], (shape[0], shape[1], -1))
        return logits, out[1], list(out[2:])

    def initial_states(self, batch_size):
        """The states a sequence starts from (the layers' own initial
        states, e.g. a multi-cell LSTM's distinct initial cells), as NumPy
        float32 arrays of shape ``(batch_size, ...)``."""
        return [
            np.broadcast_to(v, (batch_size, *v.shape)).copy()
            for v in self.initial_values
        ]

    def __call__(self, tokens, states):
        """Runs the graph: returns ``(logits, new_states)``, the logits of
        every position, ``(batch, time, vocab)``."""
        tokens = ops.convert_to_tensor(tokens, "int32")
        shape = ops.shape(tokens)
        positions = ops.arange(shape[0] * shape[1], dtype="int32")
        logits, states = self.at_positions(tokens, positions, states)
        return ops.reshape(logits, (shape[0], shape[1], -1)), states

    def at_positions(self, tokens, positions, states):
        """Runs the graph: returns ``(logits, new_states)`` with the logits
        at the flat ``positions`` only, ``(n, vocab)``. The recurrence
        runs over the whole batch either way."""
        tokens = ops.convert_to_tensor(tokens, "int32")
        positions = ops.convert_to_tensor(positions, "int32")
        states = [ops.convert_to_tensor(s, "float32") for s in states]
        out = self.model([tokens, positions, *states], training=False)
        return out[0][0], list(out[1:])


def build_inference_model(model, portable=False, stateful_source=False):
    """Builds the :class:`InferenceModel` of a stateless builder model.

    Args:
        model: a functional model mapping int tokens (batch, time) to
            logits (batch, time, vocab), e.g.
            ``build_language_model(config, V, None, stateful=False)`` with
            trained weights loaded. A stateful model is rejected (its state
            variables would be shared between requests) unless
            ``stateful_source``.

        portable: build the recurrent twins with ``fused=False`` where the
            layer has that option: no XLA-compiled function in the graph
            (for serving binaries without XLA), same numbers, slower.
        stateful_source: accept a stateful ``model`` (an Evaluator's, of a
            fixed batch size): its state variables are in no graph the
            result runs, since every recurrent layer is replaced by its
            stateless twin.

    Returns:
        An :class:`InferenceModel` sharing the non-recurrent layers (and
        their weights) with ``model`` and holding copies of the recurrent
        layers' weights.

    Raises:
        ValueError: the model is stateful, not functional, or has no
            recurrent layer.
    """
    if not isinstance(model, keras.Model) or not hasattr(
        model, "_run_through_graph"
    ):
        raise ValueError(
            f"Expected a functional keras.Model, got {type(model).__name__}"
        )
    layers = outer_recurrent_layers(model)
    if not layers:
        raise ValueError(
            f"Model {model.name!r} has no recurrent layer (see "
            "keras_rnnlm.inference_model for what a recurrent layer "
            "must provide)"
        )
    stateful = [
        layer.name for layer in layers if getattr(layer, "stateful", False)
    ]
    if stateful and not stateful_source:
        raise ValueError(
            f"Layers {stateful} are stateful: build the inference graph from "
            "a stateless model (build_language_model(..., stateful=False)) "
            "and copy the weights into it"
        )

    twins = {}
    names, shapes, values, kinds, inputs = [], [], [], [], {}
    for i, layer in enumerate(layers):
        twin = _twin(layer, portable)
        twins[id(layer)] = (i, twin)
        layer_values = _initial_values(layer)
        kinds.extend(_state_kinds(layer, len(layer_values)))
        state_inputs = []
        for k, value in enumerate(layer_values):
            shape = tuple(int(d) for d in value.shape)
            name = f"{STATE_PREFIX}_{i}_{k}"
            names.append(name)
            shapes.append(shape)
            values.append(value)
            state_inputs.append(
                keras.Input(shape=shape, dtype="float32", name=name)
            )
        inputs[i] = state_inputs
    final_states = {}
    positions = keras.Input(
        batch_shape=(None,), dtype="int32", name="positions"
    )
    after_last = set()  # ids of tensors computed from the last recurrence
    compact = set()  # ids of tensors already at ``positions`` only
    gathered = {}  # id(full tensor) -> its rows at ``positions``

    def clone_function(layer):
        entry = twins.get(id(layer))
        return layer if entry is None else entry[1]

    def at_positions(x):
        if (
            not isinstance(x, keras.KerasTensor)
            or len(x.shape) < 2
            or id(x) in compact
        ):
            return x
        if id(x) not in gathered:
            out = GatherPositions(name=f"at_positions_{len(gathered)}")(
                x, positions
            )
            gathered[id(x)] = out
            compact.add(id(out))
        return gathered[id(x)]

    def call_function(layer, *args, **kwargs):
        for i, twin in twins.values():
            if layer is twin:
                if i in final_states:
                    raise ValueError(
                        f"Recurrent layer {layer.name!r} is called more than "
                        "once; the inference graph supports one call per "
                        "recurrent layer"
                    )
                out = layer(*args, initial_state=inputs[i], **kwargs)
                final_states[i] = list(out[1:])
                if len(final_states) == len(twins):
                    after_last.add(id(out[0]))
                return out[0]
        if not any(
            id(t) in after_last for t in keras.tree.flatten((args, kwargs))
        ):
            return layer(*args, **kwargs)
        # A head layer (downstream of the last recurrence): every input at
        # ``positions`` only, each full tensor gathered once.
        args, kwargs = keras.tree.map_structure(at_positions, (args, kwargs))
        out = layer(*args, **kwargs)
        for t in keras.tree.flatten(out):
            after_last.add(id(t))
            compact.add(id(t))
        return out

    if len(model.inputs) != 1:
        raise ValueError(
            f"Expected a model with one (tokens) input, got {model.inputs}"
        )
    src = model.inputs[0]
    tokens = keras.Input(
        batch_shape=(None, None), dtype=src.dtype, name="tokens"
    )
    # What keras.models.clone_model does, but the new graph has extra
    # (state) inputs, which clone_model's own Functional cannot accept.
    logits = model._run_through_graph(
        [tokens], operation_fn=clone_function, call_fn=call_function
    )
    if isinstance(logits, (list, tuple)):
        logits = logits[0]
    logits = at_positions(logits)  # a model without a head layer
    pairs = [(layer, twins[id(layer)][1]) for layer in layers]
    for _, twin in pairs:
        # Scoring never differentiates: no per-step saves in the loops.
        set_forward_only(twin)
    state_in = [t for i in range(len(layers)) for t in inputs[i]]
    state_out = [t for i in range(len(layers)) for t in final_states[i]]
    graph = keras.Model(
        [tokens, positions, *state_in],
        [logits, *state_out],
        name=f"{model.name}_infer",
    )
    vocab_size = logits.shape[-1]
    inference = InferenceModel(
        graph, names, shapes, vocab_size, portable, values, kinds, pairs
    )
    inference.update_weights()
    return inference
