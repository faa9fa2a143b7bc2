"""Text generation: samplers and the compiled generation loop.

- :mod:`~keras_rnnlm.generation.samplers`: :class:`GreedySampler`,
  :class:`RandomSampler`, :class:`TopKSampler`, :class:`TopPSampler`
  (keras-hub's names and parameters) and :func:`get_sampler`; the one
  sampling function of every path, with stateless noise keyed by
  ``(seed, step)``.
- :mod:`~keras_rnnlm.generation.loop`: :func:`generate_ids`, the loop
  over the stateless inference graph (traceable by ``tf.function`` and
  ``jax.jit``), and :class:`GenerationLoop`, which compiles and runs it.
- :mod:`~keras_rnnlm.generation.text`: :class:`Generation` (a
  continuation, its tokens and log-probabilities), :func:`detokenize`,
  the limits of a call (:data:`MAX_TOKENS_LIMIT`, :data:`MAX_ROWS`).

:class:`keras_rnnlm.LanguageModel` generates text with them
(``LanguageModel.from_run(...).generate(...)``), and ``keras-rnnlm
generate`` from the command line.
"""

from keras_rnnlm.generation.errors import GenerationError
from keras_rnnlm.generation.loop import GenerationLoop
from keras_rnnlm.generation.loop import generate_ids
from keras_rnnlm.generation.loop import prefill_length
from keras_rnnlm.generation.loop import reset_token_ids
from keras_rnnlm.generation.samplers import MAX_SEED
from keras_rnnlm.generation.samplers import SAMPLERS
from keras_rnnlm.generation.samplers import GreedySampler
from keras_rnnlm.generation.samplers import RandomSampler
from keras_rnnlm.generation.samplers import Sampler
from keras_rnnlm.generation.samplers import TopKSampler
from keras_rnnlm.generation.samplers import TopPSampler
from keras_rnnlm.generation.samplers import get_sampler
from keras_rnnlm.generation.text import DEFAULT_MAX_TOKENS
from keras_rnnlm.generation.text import MAX_ROWS
from keras_rnnlm.generation.text import MAX_TOKENS_LIMIT
from keras_rnnlm.generation.text import Generation
from keras_rnnlm.generation.text import detokenize

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "MAX_ROWS",
    "MAX_SEED",
    "MAX_TOKENS_LIMIT",
    "SAMPLERS",
    "Generation",
    "GenerationError",
    "GenerationLoop",
    "GreedySampler",
    "RandomSampler",
    "Sampler",
    "TopKSampler",
    "TopPSampler",
    "detokenize",
    "generate_ids",
    "get_sampler",
    "prefill_length",
    "reset_token_ids",
]
