"""The export's ``generate`` signature: prompts in, sampled text out.

The graph runs :func:`keras_rnnlm.generation.generate_ids` (the loop of
``LanguageModel.from_run(...).generate``) over the export's portable
inference graph, with the samplers of
:mod:`keras_rnnlm.generation.samplers` built from the request's inputs:
one sampler per call, chosen in the graph (a ``switch_case`` over
:data:`~keras_rnnlm.generation.SAMPLERS`, in the loop's step), its
parameters traced scalars. Prompts are tokenised as ``score_text``
tokenises a sentence and read after the sentence start, prompt ``i``'s
``num_samples`` continuations in rows ``i * num_samples ...``: the rows
of the Python path, so the same seed gives the same tokens (the noise of
a row depends on its index in the call).

**Inputs** (every one required, as TF Serving requires them; the
parameters are scalars, or one equal value per prompt so that TF
Serving's row format, which stacks every input, can carry them):

==============  =======  ===============================================
``prompts``     string   ``[B]``, the prompts (an empty one starts a
                         sentence)
``max_tokens``  int32    tokens per continuation, ``0..4096``, a scalar
                         or one per prompt ``[B]`` (0: empty)
``sampler``     string   ``greedy``, ``random``, ``top_k`` or ``top_p``
``temperature`` float32  > 0 (neutral 1.0; ``greedy`` ignores it)
``top_k``       int32    ``0..V``; 0 (neutral) is none; >= 1 for
                         ``top_k``; ``top_k`` and ``top_p`` only
``top_p``       float32  ``(0, 1]``; 1.0 (neutral) is none; ``top_p``
                         only
``seed``        int64    ``0..2**31 - 1``
``num_samples`` int32    continuations per prompt, >= 1 (neutral 1)
``stop_token``  string   the token that ends a continuation (not
                         emitted); ``""`` (neutral) is none
==============  =======  ===============================================

**Outputs**, one row per continuation (``R = B x num_samples``, prompt
by prompt), ``W`` = the largest ``max_tokens``: ``tokens`` string
``[R, W]`` (``""`` after a row's end), ``token_ids`` int32 ``[R, W]``
(-1 after the end), ``token_logprobs`` float32 ``[R, W]`` (the natural
log of each token's probability under the model, before the sampler's
temperature and filtering; 0 after the end), ``lengths`` int32 ``[R]``,
``stopped`` bool ``[R]`` (the stop token ended it), ``text`` string
``[R]`` (:func:`~keras_rnnlm.generation.detokenize`'s text) and
``prompt_index`` int32 ``[R]``.

**Checks**, in the graph, before the loop (INVALID_ARGUMENT, the message
starting with the input's name): the values above, the parameters equal
across rows, ``R <= max_batch_size`` and ``R x (longest prompt + 1 +
max_tokens) <= max_tokens`` of the export's limits (its token budget:
the tokens one call feeds and generates), a prompt's out-of-vocabulary
token where the vocabulary has no ``<unk>``.

:func:`call_generate` is the Python client (``LanguageModel.from_export
(...).generate``), :func:`sampler_inputs` the inputs of a sampler.
"""

import re

import numpy as np

from keras_rnnlm.data.errors import OOVError
from keras_rnnlm.generation import SAMPLERS
from keras_rnnlm.generation import GenerationError
from keras_rnnlm.generation import GreedySampler
from keras_rnnlm.generation import RandomSampler
from keras_rnnlm.generation import TopKSampler
from keras_rnnlm.generation import TopPSampler
from keras_rnnlm.generation import generate_ids
from keras_rnnlm.generation import prefill_length
from keras_rnnlm.generation.samplers import MAX_SEED
from keras_rnnlm.generation.text import MAX_TOKENS_LIMIT
from keras_rnnlm.generation.text import Generation

#: The signature's name.
SIGNATURE = "generate"
#: The sampler parameters' values that change nothing.
NEUTRAL = {
    "temperature": 1.0,
    "top_k": 0,
    "top_p": 1.0,
    "num_samples": 1,
    "stop_token": "",
}
#: The inputs that must have one value per call (a scalar, or the same
#: value in every row).
_ONE_VALUE = (
    "sampler",
    "temperature",
    "top_k",
    "top_p",
    "seed",
    "num_samples",
    "stop_token",
)
#: The Python argument (:class:`GenerationError`) of each input.
ARGUMENTS = {
    "prompts": "prompts",
    "max_tokens": "max_tokens",
    "sampler": "sampler",
    "temperature": "temperature",
    "top_k": "k",
    "top_p": "p",
    "seed": "seed",
    "num_samples": "num_samples",
    "stop_token": "stop_token",
}


def input_specs(tf):
    """The signature's ``{name: TensorSpec}`` (the parameters of unknown
    rank: a scalar or one value per prompt)."""
    specs = {"prompts": tf.TensorSpec([None], tf.string, name="prompts")}
    for name, dtype in (
        ("max_tokens", tf.int32),
        ("sampler", tf.string),
        ("temperature", tf.float32),
        ("top_k", tf.int32),
        ("top_p", tf.float32),
        ("seed", tf.int64),
        ("num_samples", tf.int32),
        ("stop_token", tf.string),
    ):
        specs[name] = tf.TensorSpec(None, dtype, name=name)
    return specs


class SamplerSwitch:
    """The sampler of a call, chosen in the graph: ``switch_case`` over
    the samplers of :data:`~keras_rnnlm.generation.SAMPLERS` (in its
    order), each built from the traced parameters and called as
    ``sampler(log_probs, seed, step)`` (what
    :func:`~keras_rnnlm.generation.generate_ids` calls).

    Args:
        tf: the TensorFlow module.
        index: int32 scalar, the sampler's index in ``SAMPLERS``.
        temperature, k, p: the traced parameters (``k`` 0 is none).
        vocab_size: ``top_p``'s ``k`` when ``k`` is 0.
    """

    def __init__(self, tf, index, temperature, k, p, vocab_size):
        self.tf = tf
        self.index = index
        self.temperature = temperature
        self.k = k
        self.p = p
        # top_p without k sorts the whole vocabulary, as k=None does.
        self.top_p_k = tf.where(k > 0, k, vocab_size)

    def samplers(self):
        t = self.temperature
        return {
            "greedy": GreedySampler(),
            "random": RandomSampler(t),
            "top_k": TopKSampler(self.k, temperature=t),
            "top_p": TopPSampler(self.p, k=self.top_p_k, temperature=t),
        }

    def __call__(self, log_probs, seed, step):
        made = self.samplers()

        def branch(name):
            return lambda: made[name](log_probs, seed, step)

        return self.tf.switch_case(
            self.index, [branch(name) for name in SAMPLERS]
        )


def _message(name, detail):
    return f"{name}: {detail}"


class GenerateEndpoint:
    """The ``generate`` function of an export's graph
    (:class:`~keras_rnnlm.export.saved_model._Graph`: its tokeniser,
    vocabulary table, limits and inference graph)."""

    def __init__(self, graph):
        self.graph = graph
        self.tf = graph.tf

    def _assert(self, condition, name, detail, *data):
        return self.tf.debugging.Assert(
            condition, [_message(name, detail), *data], summarize=8
        )

    # ------------------------------------------------------------ inputs
    def _flat(self, x, name, batch, per_prompt):
        """``x`` flattened, after the checks of its shape: a scalar or
        ``[B]``."""
        tf = self.tf
        rank = tf.shape(tf.shape(x))[0]
        flat = tf.reshape(x, [-1])
        count = tf.shape(flat)[0]
        what = "a scalar or one value per prompt"
        checks = [
            self._assert(rank <= 1, name, f"must be {what}; got rank", rank),
            self._assert(
                tf.logical_or(tf.equal(rank, 0), tf.equal(count, batch)),
                name,
                f"must be {what}; got this many values for this many prompts:",
                count,
                batch,
            ),
        ]
        return self.graph._after(checks, flat)

    def _ranges(self, flats):
        """The checks of every value of every input."""
        tf, g = self.tf, self.graph
        samplers = tf.constant(list(SAMPLERS))
        vocab = g.vocab_size
        t, k, p = flats["temperature"], flats["top_k"], flats["top_p"]
        mt, seed, n = flats["max_tokens"], flats["seed"], flats["num_samples"]
        s, stop = flats["sampler"], flats["stop_token"]
        known = tf.reduce_any(
            tf.equal(tf.expand_dims(s, -1), tf.expand_dims(samplers, 0)),
            axis=-1,
        )
        in_vocab = tf.logical_or(tf.equal(stop, ""), g.table.lookup(stop) >= 0)
        return [
            self._assert(
                tf.reduce_all((mt >= 0) & (mt <= MAX_TOKENS_LIMIT)),
                "max_tokens",
                f"must be an integer in 0..{MAX_TOKENS_LIMIT}, got",
                mt,
            ),
            self._assert(
                tf.reduce_all(known),
                "sampler",
                f"must be one of {', '.join(SAMPLERS)}, got",
                s,
            ),
            self._assert(
                tf.reduce_all(tf.math.is_finite(t) & (t > 0)),
                "temperature",
                "must be a finite number > 0 (neutral: 1), got",
                t,
            ),
            self._assert(
                tf.reduce_all((k >= 0) & (k <= vocab)),
                "top_k",
                f"must be 0 (none) or an integer in 1..{vocab} (the "
                "vocabulary size), got",
                k,
            ),
            self._assert(
                tf.reduce_all((p > 0) & (p <= 1)),
                "top_p",
                "must be a number in (0, 1), or 1 (none), got",
                p,
            ),
            self._assert(
                tf.reduce_all((seed >= 0) & (seed <= MAX_SEED)),
                "seed",
                f"must be an integer in 0..{MAX_SEED}, got",
                seed,
            ),
            self._assert(
                tf.reduce_all((n >= 1) & (n <= g.max_batch_size)),
                "num_samples",
                f"must be an integer in 1..{g.max_batch_size} (the "
                "max_batch_size of the export), got",
                n,
            ),
            self._assert(
                tf.reduce_all(in_vocab),
                "stop_token",
                f"must be a token of the vocabulary ({vocab} tokens) or "
                "empty (none), got",
                stop,
            ),
        ]

    def _parameters(self, inputs, batch):
        """``(max_tokens [B], {name: scalar})`` of the checked inputs."""
        tf, g = self.tf, self.graph
        flats = {
            name: self._flat(inputs[name], name, batch, name == "max_tokens")
            for name in ("max_tokens", *_ONE_VALUE)
        }
        names = list(flats)
        values = g._after(self._ranges(flats), *flats.values())
        flats = dict(zip(names, values))
        same = [
            self._assert(
                tf.reduce_all(tf.equal(flats[name], flats[name][0])),
                name,
                "must be the same in every row (one sampler, seed and "
                "stop token per call), got",
                flats[name],
            )
            for name in _ONE_VALUE
        ]
        values = g._after(same, *(flats[name][0] for name in _ONE_VALUE))
        return flats["max_tokens"], dict(zip(_ONE_VALUE, values))

    def _sampler_checks(self, index, params):
        tf = self.tf
        kind = {name: i for i, name in enumerate(SAMPLERS)}
        top_k, top_p = params["top_k"], params["top_p"]
        filtering = tf.logical_or(
            tf.equal(index, kind["top_k"]), tf.equal(index, kind["top_p"])
        )
        return [
            self._assert(
                tf.logical_or(tf.not_equal(index, kind["top_k"]), top_k >= 1),
                "top_k",
                "must be >= 1 for the top_k sampler, got",
                top_k,
            ),
            self._assert(
                tf.logical_or(filtering, tf.equal(top_k, 0)),
                "top_k",
                "applies to the top_k and top_p samplers only (0: none), got",
                top_k,
            ),
            self._assert(
                tf.logical_or(
                    tf.equal(index, kind["top_p"]), tf.equal(top_p, 1.0)
                ),
                "top_p",
                "applies to the top_p sampler only (1: none), got",
                top_p,
            ),
        ]

    # ------------------------------------------------------------- graph
    def __call__(self, inputs):
        tf, g = self.tf, self.graph
        prompts = g._strings(inputs["prompts"], "prompts")
        batch = tf.shape(prompts)[0]
        max_tokens, params = self._parameters(inputs, batch)
        max_tokens = tf.broadcast_to(max_tokens, tf.reshape(batch, [1]))
        index = tf.argmax(
            tf.cast(tf.equal(params["sampler"], list(SAMPLERS)), tf.int32),
            output_type=tf.int32,
        )
        stop_id = tf.where(
            tf.equal(params["stop_token"], ""),
            -1,
            tf.cast(g.table.lookup(params["stop_token"]), tf.int32),
        )
        samples = params["num_samples"]
        ids, oov = g.lookup(g.tokenize(prompts))
        checks = self._sampler_checks(index, params)
        if g.unk_id is None:
            checks.append(
                self._assert(
                    tf.logical_not(tf.reduce_any(oov.flat_values)),
                    "prompts",
                    "a token is not in the vocabulary, which has no <unk> "
                    "(the model gives it probability 0)",
                )
            )
        bos, _ = g._bos_eos()
        col = tf.fill(tf.stack([batch, 1]), bos)
        x = tf.concat([col, ids], axis=1)
        lengths = tf.cast(x.row_lengths(), tf.int32)
        width = tf.reduce_max(lengths)
        longest = tf.reduce_max(max_tokens)
        rows = batch * samples
        checks += [
            self._assert(
                rows <= g.max_batch_size,
                "num_samples",
                f"prompts x num_samples must be at most {g.max_batch_size}"
                " (the max_batch_size of the export), got",
                rows,
            ),
            self._assert(
                tf.cast(rows, tf.int64) * tf.cast(width + longest, tf.int64)
                <= g.max_tokens,
                "max_tokens",
                "is over the token budget of the export: prompts x "
                "num_samples x (longest prompt + 1 + max_tokens) must be "
                f"at most {g.max_tokens} (its limits.max_tokens); send "
                "fewer or shorter prompts, or fewer tokens, per request; "
                "got rows and steps",
                rows,
                width + longest,
            ),
        ]
        x, lengths, max_tokens, stop_id = g._after(
            checks, x, lengths, max_tokens, stop_id
        )
        x = x.to_tensor(0)
        prompt_index = tf.range(rows) // samples
        x = tf.gather(x, prompt_index)
        lengths = tf.gather(lengths, prompt_index)
        row_max = tf.gather(max_tokens, prompt_index)
        sampler = SamplerSwitch(
            tf,
            index,
            params["temperature"],
            params["top_k"],
            params["top_p"],
            g.vocab_size,
        )
        out = generate_ids(
            g.inference,
            sampler,
            x,
            lengths,
            max_tokens=longest,
            seed=tf.cast(params["seed"], tf.int32),
            prefill=prefill_length(x, lengths, g.reset_ids),
            stop_id=stop_id,
            reset_ids=g.reset_ids,
        )
        # A row's own max_tokens: the first tokens of the longest run.
        raw = out["num_tokens"]
        num = tf.minimum(raw, row_max)
        keep = tf.range(longest)[None, :] < num[:, None]
        token_ids = tf.where(keep, out["token_ids"], -1)
        tokens = tf.where(
            keep, tf.gather(g.tokens, tf.maximum(token_ids, 0)), ""
        )
        return {
            "tokens": tokens,
            "token_ids": token_ids,
            "token_logprobs": tf.where(keep, out["log_probs"], 0.0),
            "lengths": num,
            "stopped": tf.logical_and(out["stopped"], raw < row_max),
            "text": self.detokenize(tokens, token_ids, keep, longest),
            "prompt_index": prompt_index,
        }

    def detokenize(self, tokens, token_ids, keep, width):
        """In-graph :func:`~keras_rnnlm.generation.detokenize`: words
        joined by spaces (characters joined, the word-boundary symbol a
        space), ``<eos>`` a line break."""
        tf, g = self.tf, self.graph
        if g.eos_id is None:
            is_eos = tf.fill(tf.shape(keep), False)
        else:
            is_eos = tf.logical_and(keep, tf.equal(token_ids, g.eos_id))
        if g.tokenization.mode == "whitespace":
            pieces = tokens
            # a space between two tokens of a line
            first = tf.fill(tf.stack([tf.shape(keep)[0], 1]), True)
            before = tf.concat([first, is_eos], axis=1)[:, :width]
            space = keep & ~is_eos & ~before
            sep = tf.where(space, " ", "")
            pieces = tf.strings.join([sep, pieces])
        else:
            symbol = g.tokenization.space_token
            pieces = tokens
            if symbol is not None:
                pieces = tf.where(tf.equal(tokens, symbol), " ", tokens)
        pieces = tf.where(is_eos, "\n", pieces)
        return tf.strings.reduce_join(pieces, axis=1)


# ----------------------------------------------------------------- client
def sampler_inputs(sampler):
    """The ``sampler``, ``temperature``, ``top_k`` and ``top_p`` inputs of
    a :class:`~keras_rnnlm.generation.Sampler` (one of the built-in four;
    another class is a :class:`GenerationError`)."""
    config = sampler.get_config()
    names = {cls: name for name, cls in SAMPLERS.items()}
    name = names.get(type(sampler))
    if name is None:
        raise GenerationError(
            "sampler",
            f"{type(sampler).__name__} is not one of the export's samplers "
            f"{list(SAMPLERS)}; generate from the run directory",
        )
    k = config.get("k")
    return {
        "sampler": name,
        "temperature": float(config.get("temperature", 1.0)),
        "top_k": NEUTRAL["top_k"] if k is None else int(k),
        "top_p": float(config.get("p", NEUTRAL["top_p"])),
    }


def generation_error(error):
    """The :class:`GenerationError` (or, for a prompt's unknown token,
    :class:`~keras_rnnlm.data.errors.OOVError`) of the signature's
    INVALID_ARGUMENT ``error`` (``"assertion failed: [NAME: detail]
    [value]..."``); ``None`` for another error."""
    m = _ASSERTION.search(error.message or "")
    if m is None or m["name"] not in ARGUMENTS:
        return None
    values = re.findall(r"\[([^\]]*)\]", m["values"])
    detail = " ".join([m["detail"], ", ".join(values)]).strip()
    if m["name"] == "prompts":
        return OOVError(detail)
    return GenerationError(ARGUMENTS[m["name"]], detail)


_ASSERTION = re.compile(
    r"assertion failed: \[(?P<name>\w+): (?P<detail>[^\]]*)\](?P<values>.*)"
)


def call_generate(
    model, texts, max_tokens, sampler, seed, stop_token, num_samples
):
    """The ``generate`` signature of a loaded export ``model``
    (``tf.saved_model.load``) on ``texts``: its outputs as NumPy arrays
    (strings decoded). ``stop_token``: a token, or ``""`` for none. A
    refused call raises the :func:`generation_error` of its message."""
    import tensorflow as tf  # an export is a TensorFlow SavedModel

    if SIGNATURE not in model.signatures:
        raise GenerationError(
            "model",
            "the export has no generate signature (an export of an older "
            "keras-rnnlm); export the run again or generate from it",
        )
    inputs = {
        "prompts": tf.constant([t.encode("utf-8") for t in texts]),
        "max_tokens": tf.constant(max_tokens, tf.int32),
        "seed": tf.constant(seed, tf.int64),
        "num_samples": tf.constant(num_samples, tf.int32),
        "stop_token": tf.constant(stop_token.encode("utf-8")),
    }
    for name, value in sampler_inputs(sampler).items():
        dtype = {"sampler": tf.string, "top_k": tf.int32}.get(name, tf.float32)
        inputs[name] = tf.constant(value, dtype)
    try:
        out = model.signatures[SIGNATURE](**inputs)
    except tf.errors.InvalidArgumentError as e:
        error = generation_error(e)
        if error is None:
            raise
        raise error from None
    out = {k: v.numpy() for k, v in out.items()}
    for key in ("tokens", "text"):
        out[key] = np.vectorize(
            lambda b: b.decode("utf-8", "replace"), otypes=[object]
        )(out[key])
    return out


def generations(model, texts, max_tokens, sampler, seed, stop_token,
                num_samples):  # fmt: skip
    """:func:`call_generate`'s continuations as
    :class:`~keras_rnnlm.generation.Generation` objects, prompt by prompt
    and each prompt's samples in order (``LanguageModel.generate``'s)."""
    if not texts:
        return []
    out = call_generate(
        model, texts, max_tokens, sampler, seed, stop_token, num_samples
    )
    return [
        Generation(
            prompt=texts[int(out["prompt_index"][row])],
            text=out["text"][row],
            tokens=list(out["tokens"][row, :n]),
            token_ids=[int(i) for i in out["token_ids"][row, :n]],
            log_probs=np.asarray(out["token_logprobs"][row, :n]),
            finish_reason="stop" if out["stopped"][row] else "length",
            seed=seed,
        )
        for row, n in enumerate(out["lengths"].tolist())
    ]
