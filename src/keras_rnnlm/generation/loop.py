"""The generation loop: prompts in, sampled token ids out, the recurrent
state carried step by step inside one compiled loop.

:func:`generate_ids` is written in ``keras.ops`` over the stateless
inference graph (:class:`~keras_rnnlm.scoring.InferenceModel`: tokens and
states in, logits and states out). It traces into one ``tf.function``
(the loop a ``tf.while_loop``, every op one a stock TF Serving runs) or
one ``jax.jit`` (a ``lax.while_loop``); :class:`GenerationLoop` compiles
and runs it from NumPy.

**Prompts.** Row ``i`` of ``prompt_ids`` holds its inputs in its first
``lengths[i]`` columns: the sentence-start token (``<eos>``, as in
scoring, :mod:`keras_rnnlm.scoring.scorer`), then the prompt's tokens.
The first ``prefill`` inputs of every row run as one sequence through the
graph (``prefill`` <= the shortest row, see :func:`prefill_length`); the
loop then feeds one input a step to every row: the row's next prompt
token while it has one, else the token just sampled. So no row ever
reads a padding token: each row's state is exactly that of its own
prompt, whatever the other rows' lengths (rows of different lengths
sample their first token at different steps).

**Each step** of the loop, for every row: the log-probabilities of the
next token (the model's, mixed with the continuous cache's where one is
given), the sampler's choice (:mod:`keras_rnnlm.generation.samplers`,
noise keyed by ``(seed, position)``), the input fed (prompt or sample),
and for a generating row its token and log-probability recorded. A row
stops at the stop token (not recorded) or after ``max_tokens`` tokens;
the loop stops when every row has.

**Carried along the loop**: the recurrent states (every state tensor of
the graph: a CBOW context's last ``K`` word ids among them), the
log-probabilities of the last position, and with a cache
(:class:`~keras_rnnlm.cache_pointer.CacheConfig`) its memory, the last
``W`` keys (the last recurrent layer's outputs) and the tokens that
followed them, as :mod:`keras_rnnlm.cache_pointer` defines them: the key
of position ``t`` enters the memory with the token chosen after it, and
position ``t``'s distribution mixes in the cache over the positions
before it. A sentence-level run (``reset_ids``: the tokens that start a
sentence, :func:`reset_token_ids`) sets the recurrent states back to
their initial values before feeding such a token, as the scorer does.
"""

import keras
import numpy as np
from keras import ops

from keras_rnnlm.cache_pointer import mix_log_probs
from keras_rnnlm.data.sentences import sentence_starts
from keras_rnnlm.generation.samplers import GreedySampler
from keras_rnnlm.generation.samplers import RandomSampler
from keras_rnnlm.loops.loop_parts import may_split


def reset_token_ids(vocab, rule):
    """The ids of the inputs before which a sentence-level run resets its
    recurrent states (``rule`` ``"line"`` or ``"punctuation"``, see
    :func:`~keras_rnnlm.data.sentences.sentence_starts`); none for
    ``rule=None``."""
    if rule is None:
        return []
    ids = np.arange(len(vocab))
    return [int(i) for i in np.flatnonzero(sentence_starts(ids, vocab, rule))]


def prefill_length(prompt_ids, lengths, reset_ids=()):
    """How many inputs of every row :func:`generate_ids` may run as one
    sequence: the shortest row's length, and no further than the first
    input (after the first) that resets the states (``reset_ids``), since
    a reset happens between steps. At least 1. ``keras.ops`` (a traced
    int32 scalar in a graph; ``int()`` of it for :func:`generate_ids`'s
    static argument on JAX)."""
    prompt_ids = ops.convert_to_tensor(prompt_ids, "int32")
    lengths = ops.convert_to_tensor(lengths, "int32")
    width = ops.shape(prompt_ids)[1]
    shortest = ops.min(lengths)
    if len(reset_ids):
        resets = ops.any(
            ops.expand_dims(prompt_ids, -1)
            == ops.convert_to_tensor(list(reset_ids), "int32"),
            axis=-1,
        )
        column = ops.expand_dims(ops.arange(width, dtype="int32"), 0)
        inside = ops.logical_and(
            column >= 1, column < ops.expand_dims(lengths, -1)
        )
        first = ops.where(ops.logical_and(resets, inside), column, width)
        shortest = ops.minimum(shortest, ops.min(first))
    return ops.cast(ops.maximum(shortest, 1), "int32")


def initial_state_tensors(inference, batch):
    """The graph's initial states, ``(batch, ...)`` each (constants)."""
    return [
        ops.broadcast_to(
            ops.convert_to_tensor(value[None], "float32"),
            (batch, *value.shape),
        )
        for value in inference.initial_values
    ]


def _cache_log_probs(key, memory_keys, memory_values, seen, vocab_lp, cache):
    """The next-token log-probabilities of the current position mixed
    with the cache: ``key`` ``(B, d)`` against the memory's ``W`` slots
    (the last ``min(seen, W)`` filled); rows with an empty memory keep
    ``vocab_lp``."""
    window = cache.window
    scores = cache.theta * ops.einsum("bd,bwd->bw", key, memory_keys)
    slot = ops.expand_dims(ops.arange(window, dtype="int32"), 0)
    filled = slot >= window - ops.expand_dims(ops.minimum(seen, window), -1)
    used = ops.any(filled, axis=-1, keepdims=True)
    scores = ops.where(filled, scores, ops.full_like(scores, -np.inf))
    top = ops.max(scores, axis=-1, keepdims=True)
    top = ops.where(ops.isfinite(top), top, ops.zeros_like(top))
    weights = ops.where(filled, ops.exp(scores - top), ops.zeros_like(scores))
    weights = weights / ops.maximum(
        ops.sum(weights, axis=-1, keepdims=True), 1e-30
    )
    # p_cache(w): the weights of the slots whose next token is w, summed
    batch = ops.shape(vocab_lp)[0]
    vocab = ops.shape(vocab_lp)[1]
    rows = ops.expand_dims(ops.arange(batch, dtype="int32"), -1)
    flat = ops.reshape(rows * vocab + memory_values, (-1,))
    p_cache = ops.segment_sum(
        ops.reshape(weights, (-1,)), flat, num_segments=batch * vocab
    )
    p_cache = ops.reshape(p_cache, (batch, vocab))
    cache_lp = ops.log(p_cache)
    return mix_log_probs(vocab_lp, cache_lp, cache.lam, used)


def generate_ids(
    inference,
    sampler,
    prompt_ids,
    lengths,
    *,
    max_tokens,
    seed,
    prefill,
    stop_id=-1,
    reset_ids=(),
    cache=None,
    capacity=None,
):
    """Samples up to ``max_tokens`` tokens after each row's prompt (see
    the module docstring).

    Args:
        inference: the :class:`~keras_rnnlm.scoring.InferenceModel`.
        sampler: a :class:`~keras_rnnlm.generation.Sampler`.
        prompt_ids: int32 ``(B, P)``: row ``i``'s inputs in its first
            ``lengths[i]`` columns (the sentence-start token first).
        lengths: int32 ``(B,)``, each >= 1.
        max_tokens: tokens to generate at most per row (>= 0).
        seed: the sampler's seed (int32 scalar).
        prefill: inputs run as one sequence first
            (:func:`prefill_length`; a Python int under ``jax.jit``).
        stop_id: the token that ends a row (not recorded); -1: none.
        reset_ids: tokens before which the recurrent states restart
            (:func:`reset_token_ids`).
        cache: a :class:`~keras_rnnlm.cache_pointer.CacheConfig` (its
            natural start, ``reference=False``) or ``None``.
        capacity: the outputs' columns, at least ``max_tokens`` (a
            constant, so that an XLA program's shapes do not depend on
            ``max_tokens``; ``None``: ``max_tokens``).

    Returns:
        A dict: ``token_ids`` int32 ``(B, capacity)`` (-1 after a row's
        end), ``log_probs`` float32 ``(B, capacity)`` (the natural log
        of each token's probability under the model, the cache mixed in,
        before the sampler's temperature and filtering; 0 after the end),
        ``num_tokens`` int32 ``(B,)`` and ``stopped`` bool ``(B,)``
        (whether the row ended at the stop token).
    """
    prompt_ids = ops.convert_to_tensor(prompt_ids, "int32")
    lengths = ops.convert_to_tensor(lengths, "int32")
    seed = ops.convert_to_tensor(seed, "int32")
    stop_id = ops.convert_to_tensor(stop_id, "int32")
    if cache is not None and (cache.window == 0 or cache.lam == 0.0):
        cache = None
    batch, width = ops.shape(prompt_ids)[0], ops.shape(prompt_ids)[1]
    initial = initial_state_tensors(inference, batch)
    recurrent = [kind != "token_ids" for kind in inference.state_kinds]
    reset_ids = ops.convert_to_tensor(list(reset_ids) or [-1], "int32")
    rows = ops.arange(batch, dtype="int32")

    # -- the first ``prefill`` inputs of every row, as one sequence
    x = prompt_ids[:, :prefill]
    last = rows * prefill + (prefill - 1)
    memory = ()
    if cache is None:
        logits, states = inference.at_positions(x, last, initial)
        key = ops.zeros((batch, 1), "float32")  # unused
    else:
        out = inference.keyed_model([x, last, *initial], training=False)
        logits, keys, states = out[0][0], out[1], list(out[2:])
        keys = ops.cast(keys, "float32")
        key = keys[:, -1]
        window, dim = cache.window, ops.shape(keys)[-1]
        memory_keys = ops.concatenate(
            [ops.zeros((batch, window, dim), "float32"), keys[:, :-1]], 1
        )[:, -window:]
        memory_values = ops.concatenate(
            [ops.zeros((batch, window), "int32"), prompt_ids[:, 1:prefill]], 1
        )[:, -window:]
        seen = ops.zeros((batch,), "int32") + (prefill - 1)
        memory = (memory_keys, memory_values, seen)

    if capacity is None:
        capacity = max_tokens
    columns = ops.expand_dims(ops.arange(capacity, dtype="int32"), 0)
    out_ids = ops.full((batch, capacity), -1, "int32")
    out_lp = ops.zeros((batch, capacity), "float32")
    num = ops.zeros((batch,), "int32")
    stopped = ops.zeros((batch,), "bool")
    done = ops.logical_or(stopped, max_tokens <= 0)
    position = ops.convert_to_tensor(prefill, "int32")

    def cond(position, logits, key, memory, states, *outputs):
        return ops.logical_not(ops.all(outputs[-1]))

    def body(position, logits, key, memory, states, out_ids, out_lp, num,
             stopped, done):  # fmt: skip
        log_probs = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
        if cache is not None:
            log_probs = _cache_log_probs(key, *memory, log_probs, cache)
        sampled = sampler(log_probs, seed, position)
        in_prompt = position < lengths
        from_prompt = ops.take(
            prompt_ids, ops.minimum(position, width - 1), axis=1
        )
        token = ops.where(in_prompt, from_prompt, sampled)
        generating = ops.logical_and(
            ops.logical_not(in_prompt), ops.logical_not(done)
        )
        stop = ops.logical_and(generating, ops.equal(sampled, stop_id))
        keep = ops.logical_and(generating, ops.logical_not(stop))
        column = position - lengths
        at = ops.logical_and(
            ops.expand_dims(keep, -1),
            columns == ops.expand_dims(column, -1),
        )
        lp = ops.take_along_axis(
            log_probs, ops.expand_dims(sampled, -1), axis=-1
        )
        out_ids = ops.where(at, ops.expand_dims(sampled, -1), out_ids)
        out_lp = ops.where(at, lp, out_lp)
        num = num + ops.cast(keep, "int32")
        stopped = ops.logical_or(stopped, stop)
        full = ops.logical_and(generating, column + 1 >= max_tokens)
        done = ops.logical_or(done, ops.logical_or(stop, full))
        if cache is not None:
            memory_keys, memory_values, seen = memory
            memory = (
                ops.concatenate(
                    [memory_keys[:, 1:], ops.expand_dims(key, 1)], 1
                ),
                ops.concatenate(
                    [memory_values[:, 1:], ops.expand_dims(token, 1)], 1
                ),
                seen + 1,
            )
        starts = ops.any(
            ops.expand_dims(token, -1) == ops.expand_dims(reset_ids, 0),
            axis=-1,
        )
        states = [
            _where_rows(starts, s0, s) if r else s
            for s, s0, r in zip(states, initial, recurrent)
        ]
        x = ops.expand_dims(token, -1)

        def advance():
            if cache is None:
                new_logits, new_states = inference.at_positions(x, rows, states)
                return new_logits, key, new_states
            out = inference.keyed_model([x, rows, *states], training=False)
            return out[0][0], ops.cast(out[1][:, 0], "float32"), list(out[2:])

        # the model runs on the step's input only if a row goes on: the
        # last step samples without running it (for one token, the
        # prompt's reading and a sampling)
        logits, key, states = ops.cond(
            ops.all(done), lambda: (logits, key, list(states)), advance
        )
        return (position + 1, logits, key, memory, states, out_ids, out_lp,
                num, stopped, done)  # fmt: skip

    steps = ops.max(lengths) - prefill + max_tokens
    result = ops.while_loop(
        cond,
        body,
        (
            position,
            logits,
            key,
            memory,
            states,
            out_ids,
            out_lp,
            num,
            stopped,
            done,
        ),
        maximum_iterations=steps,
    )
    out_ids, out_lp, num, stopped = result[5:9]
    return {
        "token_ids": out_ids,
        "log_probs": out_lp,
        "num_tokens": num,
        "stopped": stopped,
    }


class RecentlyUsed:
    """Values made on demand by ``make(key)``, at most ``size`` of them
    kept: the least recently used is dropped (and made again if asked
    for), so a long-lived process asking for ever new keys keeps a
    bounded memory."""

    def __init__(self, make, size):
        self._make = make
        self._size = size
        self._values = {}  # in order of use, the most recent last

    def get(self, key):
        value = self._values.pop(key, None)
        if value is None:
            value = self._make(key)
        self._values[key] = value
        while len(self._values) > self._size:
            self._values.pop(next(iter(self._values)))
        return value

    def keys(self):
        """The keys kept, the most recently used last."""
        return list(self._values)

    def __len__(self):
        return len(self._values)


class BatchTraces:
    """The TensorFlow generation loop's traces, one a batch size where
    the recurrent loops run as row blocks, else one for every batch.

    Why: at more than one inter-op thread the recurrent loops of a graph
    with a static batch run as concurrent row blocks
    (:func:`~keras_rnnlm.loops.loop_parts.may_split`), each block's step
    on one core, where the whole batch's step would be one small XLA
    program split over the intra-op threads, which at two threads is
    slower than one thread (the mLSTM of ``recipes/mlstm_ptb.py``, batch
    32). A batch too small to split (and every batch at one thread)
    shares the trace of a dynamic batch. At most
    :data:`MAX_BATCH_TRACES` traces are kept (:class:`RecentlyUsed`).

    ``trace(batch)``: the concrete function of that static batch
    (``None``: dynamic).
    """

    def __init__(self, trace):
        self.traces = RecentlyUsed(trace, MAX_BATCH_TRACES)

    def batch_key(self, batch):
        """The static batch the trace for ``batch`` rows has, or
        ``None`` (the dynamic trace)."""
        return int(batch) if may_split(int(batch)) else None

    def __call__(self, ids, lengths, seed, max_tokens):
        fn = self.traces.get(self.batch_key(ids.shape[0]))
        return fn(ids, lengths, seed, max_tokens)


#: Traces a :class:`BatchTraces` keeps at most (the dynamic one among
#: them).
MAX_BATCH_TRACES = 4


def bucket(n, smallest, factor=2):
    """``n`` rounded up to ``smallest`` times a power of ``factor``."""
    size = smallest
    while size < n:
        size *= factor
    return size


def floor_power(n, factor):
    """The largest power of ``factor`` not above ``n`` (``n`` >= 1)."""
    size = 1
    while size * factor <= n:
        size *= factor
    return size


#: How :class:`WholeProgram` rounds a call's shapes up, as ``(smallest,
#: factor, largest)``: its rows, its prompt width (inputs) and its output
#: columns (tokens). A call beyond any largest runs in the TensorFlow
#: graph instead.
WHOLE_PROGRAM_SHAPES = ((1, 2, 64), (32, 4, 2048), (16, 4, 4096))
#: The samplers a :class:`WholeProgram` runs (their parameter, the
#: temperature, a tensor): top-k and top-p take their ``k`` as a constant
#: of XLA's program, so they run in the graph.
WHOLE_PROGRAM_SAMPLERS = (GreedySampler, RandomSampler)
#: The prompt inputs a :class:`WholeProgram` reads as one sequence: the
#: shortest row's (see :func:`prefill_length`) rounded down to a power of
#: this.
PREFILL_FACTOR = 4


class WholeProgram:
    """The TensorFlow generation loop as one XLA program: the prompt's
    reading, every step's model, the sampler and the loop's bookkeeping
    fused, with no TensorFlow op dispatched a step.

    Why: a character-level model's step is small (the mLSTM of
    ``recipes/mlstm_ptb.py`` has about 0.3M weights and 50 symbols), so
    in the TensorFlow graph the per-op dispatch of the loop's ops sets
    its speed. Measured on that model, untrained, a 2-core AMD EPYC with
    AVX-512, 200 tokens after a 20-character prompt: batch 1, 3,900-8,200
    tokens/s in the graph against 28,000-30,000 as one program; batch
    32, 45,600-48,100 against 62,200-78,600 (one and two threads). A
    word-level model's step is its large softmax's, where XLA's program
    was slower than the graph's kernels (the AWD-LSTM ``cpu`` shape:
    250-350 against 400-750 tokens/s at batch 1): they stay in the graph
    (:class:`GenerationLoop`'s ``whole_program``).

    XLA compiles one program per shape and per value of what sets one:
    the rows, the prompt width and the output columns are rounded up
    (:data:`WHOLE_PROGRAM_SHAPES`; padding rows copy the first row's
    prompt and are dropped, and the noise of a row does not depend on the
    others), and the prompt inputs read as one sequence rounded down to a
    power of :data:`PREFILL_FACTOR` (the rest are read one a step). So one
    loop compiles at most 7 x 4 x 5 x 6 programs for each of the two
    samplers of :data:`WHOLE_PROGRAM_SAMPLERS`, each kept for the
    process's life (XLA's compilation cache does not drop programs); the
    sampler's temperature and the stop token are inputs, not constants,
    so new values compile nothing. ``fn(ids, ints, prefill, capacity,
    temperature)`` is the compiled :func:`generate_ids`, ``ints`` the seed,
    ``max_tokens``, the stop token and the rows' lengths.
    """

    def __init__(self, fn, reset_ids=()):
        self.fn = fn
        self.reset_ids = reset_ids

    @staticmethod
    def fits(batch, width, max_tokens):
        """Whether a call of these sizes runs as one program."""
        return all(
            bucket(n, low, factor) <= high
            for n, (low, factor, high) in zip(
                (batch, width, max_tokens), WHOLE_PROGRAM_SHAPES
            )
        )

    def __call__(self, ids, lengths, seed, max_tokens, stop_id, temperature):
        batch, width = ids.shape
        rows, columns, capacity = (
            bucket(n, low, factor)
            for n, (low, factor, _) in zip(
                (batch, width, int(max_tokens)), WHOLE_PROGRAM_SHAPES
            )
        )
        if self.reset_ids:
            prefill = int(prefill_length(ids, lengths, self.reset_ids))
        else:  # the shortest row (prefill_length without its eager ops)
            prefill = max(int(lengths.min()), 1)
        padded = np.zeros((rows, columns), np.int32)
        padded[:batch, :width] = ids
        padded[batch:] = padded[0]
        padded_lengths = np.full(rows, lengths[0], np.int32)
        padded_lengths[:batch] = lengths
        # the runtime integers in one vector: fewer arguments to bind a
        # call (the prefill and the capacity set shapes: XLA constants)
        ints = np.concatenate(
            [np.array([seed, max_tokens, stop_id], np.int32), padded_lengths]
        )
        out = self.fn(
            padded,
            ints,
            np.int32(floor_power(prefill, PREFILL_FACTOR)),
            np.int32(capacity),
            np.float32(temperature),
        )
        out = {k: ops.convert_to_numpy(v)[:batch] for k, v in out.items()}
        n = int(max_tokens)
        out["token_ids"] = out["token_ids"][:, :n]
        out["log_probs"] = out["log_probs"][:, :n]
        return out


#: Compiled loops (one per sampler, stop token and cache) a
#: :class:`GenerationLoop` keeps at most.
MAX_LOOPS = 8


def _where_rows(rows, a, b):
    """``a`` where ``rows`` (``(B,)`` bool) else ``b``, for ``(B, ...)``
    tensors."""
    mask = ops.reshape(rows, (-1,) + (1,) * (len(a.shape) - 1))
    return ops.where(mask, a, b)


class GenerationLoop:
    """:func:`generate_ids` compiled for one inference graph and run from
    NumPy: a ``tf.function`` on TensorFlow (one trace for every prompt
    width, length and seed, and for every batch except those whose loops
    run as row blocks, :class:`BatchTraces`; the prefill computed in the
    graph, called as its concrete function), a ``jax.jit`` on JAX (one per
    shape, length and prefill), one per (sampler, stop token, cache), the
    :data:`MAX_LOOPS` most recently used kept. With ``whole_program``, a
    TensorFlow call of the greedy or random sampler without a cache, of
    shapes within :data:`WHOLE_PROGRAM_SHAPES`, runs as one XLA program
    instead (:class:`WholeProgram`); it samples the same tokens.

    Args:
        inference: the :class:`~keras_rnnlm.scoring.InferenceModel`.
        reset_ids: the inputs before which a sentence-level run resets
            its recurrent states (:func:`reset_token_ids`).
        whole_program: on TensorFlow, run a call that fits
            :class:`WholeProgram`'s shapes as one XLA program (for
            character-level models; see there).
    """

    def __init__(self, inference, reset_ids=(), whole_program=False):
        self.inference = inference
        self.reset_ids = [int(i) for i in reset_ids]
        self.whole_program = whole_program
        self._compiled = RecentlyUsed(
            lambda key: self._compile(*key), MAX_LOOPS
        )
        self._programs = {}  # sampler class -> WholeProgram

    def __call__(self, prompts, sampler, max_tokens, seed, stop_id=-1,
                 cache=None):  # fmt: skip
        """Generates after each of ``prompts`` (lists of input ids, the
        sentence-start token first, each non-empty); returns
        :func:`generate_ids`'s dict as NumPy arrays."""
        lengths = np.array([len(p) for p in prompts], np.int32)
        if not len(prompts) or lengths.min() < 1:
            raise ValueError("every prompt needs its sentence-start input")
        ids = np.zeros((len(prompts), int(lengths.max())), np.int32)
        for row, p in enumerate(prompts):
            ids[row, : len(p)] = p
        program = self._whole_program(sampler, cache, ids.shape, max_tokens)
        if program is not None:
            return program(
                ids, lengths, seed, max_tokens, stop_id, sampler.temperature
            )
        fn = self._function(sampler, int(stop_id), cache)
        out = fn(ids, lengths, np.int32(seed), np.int32(max_tokens))
        return {k: ops.convert_to_numpy(v) for k, v in out.items()}

    def _whole_program(self, sampler, cache, shape, max_tokens):
        """The :class:`WholeProgram` that runs this call, or ``None``
        (the call runs in the TensorFlow graph): one per sampler class
        (:data:`WHOLE_PROGRAM_SAMPLERS`), the temperature and the stop
        token its inputs."""
        if not (
            self.whole_program
            and cache is None
            and type(sampler) in WHOLE_PROGRAM_SAMPLERS
            and keras.backend.backend() == "tensorflow"
            and WholeProgram.fits(*shape, max_tokens)
        ):
            return None
        cls = type(sampler)
        if cls not in self._programs:
            self._programs[cls] = WholeProgram(
                self._program_function(cls), self.reset_ids
            )
        return self._programs[cls]

    def _program_function(self, cls):
        import tensorflow as tf  # the TensorFlow backend

        def fn(ids, ints, prefill, capacity, temperature):
            seed, max_tokens, stop_id, lengths = (
                ints[0], ints[1], ints[2], ints[3:]
            )  # fmt: skip
            sampler = cls() if cls is GreedySampler else cls(temperature)
            return self._generate_ids(
                sampler, stop_id, None, ids, lengths, seed, max_tokens,
                prefill, capacity,
            )  # fmt: skip

        scalar = tf.TensorSpec([], tf.int32)
        return tf.function(
            fn,
            input_signature=[
                tf.TensorSpec([None, None], tf.int32),
                tf.TensorSpec([None], tf.int32),
                scalar,
                scalar,
                tf.TensorSpec([], tf.float32),
            ],
            jit_compile=True,
            autograph=False,
        ).get_concrete_function()

    def _function(self, sampler, stop_id, cache):
        return self._compiled.get((sampler, stop_id, cache))

    def _generate_ids(self, sampler, stop_id, cache, prompt_ids, lengths,
                      seed, max_tokens, prefill, capacity=None):  # fmt: skip
        """:func:`generate_ids` of this loop's graph and resets."""
        return generate_ids(
            self.inference,
            sampler,
            prompt_ids,
            lengths,
            max_tokens=max_tokens,
            seed=seed,
            prefill=prefill,
            stop_id=stop_id,
            reset_ids=self.reset_ids,
            cache=cache,
            capacity=capacity,
        )

    def _compile(self, sampler, stop_id, cache):
        def fn(prompt_ids, lengths, seed, max_tokens, prefill):
            return self._generate_ids(
                sampler, stop_id, cache, prompt_ids, lengths, seed,
                max_tokens, prefill,
            )  # fmt: skip

        backend = keras.backend.backend()
        if backend == "tensorflow":
            import tensorflow as tf  # the TensorFlow backend

            def in_graph(prompt_ids, lengths, seed, max_tokens):
                # the prefill computed in the graph, as the export does:
                # no eager op a call
                prefill = prefill_length(prompt_ids, lengths, self.reset_ids)
                return fn(prompt_ids, lengths, seed, max_tokens, prefill)

            def trace(batch):
                scalar = tf.TensorSpec([], tf.int32)
                # called as its concrete function (no argument binding
                # or signature matching a call)
                return tf.function(
                    in_graph,
                    input_signature=[
                        tf.TensorSpec([batch, None], tf.int32),
                        tf.TensorSpec([batch], tf.int32),
                        scalar,
                        scalar,
                    ],
                    autograph=False,
                ).get_concrete_function()

            return BatchTraces(trace)
        compiled = fn
        if backend == "jax":
            import jax  # the JAX backend

            compiled = jax.jit(fn, static_argnames=("max_tokens", "prefill"))

        def run(ids, lengths, seed, max_tokens):
            prefill = int(prefill_length(ids, lengths, self.reset_ids))
            return compiled(ids, lengths, seed, int(max_tokens), prefill)

        return run
