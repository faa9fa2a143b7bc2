"""Generated tokens as text, and the limits of a generation call."""

import dataclasses
import numbers

import numpy as np

from keras_rnnlm.generation.errors import GenerationError

#: ``max_tokens`` of ``generate`` when not given.
DEFAULT_MAX_TOKENS = 64
#: The most tokens one ``generate`` call produces per continuation.
MAX_TOKENS_LIMIT = 4096
#: The most continuations (prompts x samples) of one ``generate`` call:
#: they run as one batch, whose memory grows with rows x vocabulary.
MAX_ROWS = 65536


def check_max_tokens(max_tokens):
    """``max_tokens`` as an int in ``[0, MAX_TOKENS_LIMIT]`` (0: an empty
    continuation); a :class:`GenerationError` otherwise."""
    if (
        isinstance(max_tokens, bool)
        or not isinstance(max_tokens, numbers.Integral)
        or not 0 <= max_tokens <= MAX_TOKENS_LIMIT
    ):
        raise GenerationError(
            "max_tokens",
            f"must be an integer in [0, {MAX_TOKENS_LIMIT}], got "
            f"{max_tokens!r}",
        )
    return int(max_tokens)


def check_num_samples(num_samples, num_prompts):
    """``num_samples`` as an int >= 1 with ``num_prompts x num_samples
    <= MAX_ROWS``; a :class:`GenerationError` otherwise."""
    if (
        isinstance(num_samples, bool)
        or not isinstance(num_samples, numbers.Integral)
        or num_samples < 1
    ):
        raise GenerationError(
            "num_samples",
            f"must be an integer >= 1, got {num_samples!r}",
        )
    if int(num_samples) * num_prompts > MAX_ROWS:
        raise GenerationError(
            "num_samples",
            f"{num_samples} x {num_prompts} prompt(s) exceeds the "
            f"{MAX_ROWS} continuations of one call",
        )
    return int(num_samples)


def detokenize(tokens, tokenization, eos_token=None):
    """The text of generated ``tokens`` (strings) under ``tokenization``
    (:class:`~keras_rnnlm.scoring.Tokenization`): words joined by spaces,
    characters joined (the word-boundary symbol a space); ``eos_token``
    (a line's end in the corpus) is a line break."""
    lines, line = [], []
    for token in tokens:
        if eos_token is not None and token == eos_token:
            lines.append(line)
            line = []
        else:
            line.append(token)
    lines.append(line)
    if tokenization.mode == "whitespace":
        return "\n".join(" ".join(words) for words in lines)
    space = tokenization.space_token
    return "\n".join(
        "".join(" " if c == space else c for c in chars) for chars in lines
    )


@dataclasses.dataclass
class Generation:
    """One continuation of a prompt.

    Attributes:
        prompt: the prompt's text.
        text: the continuation (:func:`detokenize`), without the prompt
            and the stop token.
        tokens: the generated tokens (strings), the stop token excluded.
        token_ids: their ids.
        log_probs: the natural log of each token's probability under the
            model (the cache mixed in where one was used), before the
            sampler's temperature and filtering.
        finish_reason: ``"stop"`` (the stop token was sampled) or
            ``"length"`` (``max_tokens`` reached).
        seed: the seed of the call that generated it.
    """

    prompt: str
    text: str
    tokens: list
    token_ids: list
    log_probs: np.ndarray
    finish_reason: str
    seed: int

    @property
    def log_prob(self):
        """The natural log of the continuation's probability."""
        return float(np.sum(self.log_probs, dtype=np.float64))

    def to_dict(self):
        return {
            "prompt": self.prompt,
            "text": self.text,
            "tokens": list(self.tokens),
            "token_ids": [int(i) for i in self.token_ids],
            "logprobs": [float(x) for x in self.log_probs],
            "log_prob": self.log_prob,
            "finish_reason": self.finish_reason,
            "seed": self.seed,
        }
