"""``keras-rnnlm generate``: continuations of prompts.

keras-rnnlm generate MODEL [--prompt TEXT ... | --prompt-file FILE]
    [--max-tokens N] [--num-samples N] [--sampler greedy|random|top_k|top_p]
    [--temperature T] [--top-k K] [--top-p P] [--seed S]
    [--stop-token TOKEN | --no-stop-token] [--cache SETTING] [--json]

MODEL is a run directory or an export, as for ``score``. Without a prompt
the model starts one sentence. Prints one continuation a line (prompt by
prompt, each prompt's samples in order), without the prompt, escaped as
``score`` escapes a line (a line break inside a continuation is ``\\n``);
``--json`` prints one JSON object a line instead: ``prompt_index``,
``sample``, ``prompt``, ``text``, ``tokens``, ``token_ids``, ``logprobs``
(natural log, one per token), ``log_prob``, ``finish_reason`` (``stop``
or ``length``) and ``seed``. The same seed gives the same text as
``LanguageModel.generate`` with the same arguments.

Every bad value is one line naming its flag (exit 2): the library's
:class:`~keras_rnnlm.generation.GenerationError` names its Python
argument, which :data:`FLAGS` maps to the flag.
"""

import json
import sys

from keras_rnnlm.cli.errors import UsageError
from keras_rnnlm.cli.scoring import _open_lines
from keras_rnnlm.cli.scoring import escape_tsv_field
from keras_rnnlm.generation import GenerationError
from keras_rnnlm.generation import get_sampler
from keras_rnnlm.generation.samplers import check_seed
from keras_rnnlm.generation.text import check_max_tokens
from keras_rnnlm.generation.text import check_num_samples
from keras_rnnlm.language_model import AUTO
from keras_rnnlm.language_model import LanguageModel

#: The flag of each argument a GenerationError may name.
FLAGS = {
    "max_tokens": "--max-tokens",
    "num_samples": "--num-samples",
    "sampler": "--sampler",
    "temperature": "--temperature",
    "k": "--top-k",
    "p": "--top-p",
    "seed": "--seed",
    "stop_token": "--stop-token",
    "cache": "--cache",
    "model": "MODEL",
}


def _prompts(args):
    if args.prompt_file is not None:
        return list(_open_lines(args.prompt_file))
    return list(args.prompt) if args.prompt else [""]


def _sampler(args):
    """The sampler of ``--sampler`` and its flags; a flag that does not
    apply to it is a usage error."""
    name = args.sampler
    if args.top_k is not None and name not in ("top_k", "top_p"):
        raise UsageError("--top-k applies to --sampler top_k or top_p")
    if args.top_p is not None and name != "top_p":
        raise UsageError("--top-p applies to --sampler top_p")
    if name == "greedy":  # no temperature: --temperature is ignored
        return get_sampler("greedy")
    kwargs = {}
    if args.temperature is not None:
        kwargs["temperature"] = args.temperature
    if args.top_k is not None:
        kwargs["k"] = args.top_k
    if args.top_p is not None:
        kwargs["p"] = args.top_p
    return get_sampler(name, **kwargs)


def _stop_token(args):
    if args.no_stop_token:
        return None
    return AUTO if args.stop_token is None else args.stop_token


def run_generate(args):
    try:
        return _generate(args)
    except GenerationError as e:
        flag = FLAGS.get(e.argument, e.argument)
        raise UsageError(f"{flag} {e.detail}") from e


def _generate(args):
    # the flags first: a bad value is reported before the model loads
    prompts = _prompts(args)
    check_max_tokens(args.max_tokens)
    check_num_samples(args.num_samples, len(prompts))
    sampler = _sampler(args)
    if args.seed is not None:
        check_seed(args.seed)
    model = LanguageModel.load(args.model, weights=args.weights)
    if model.is_export and args.cache is not None:
        raise UsageError("--cache needs a run directory")
    results = model.generate(
        prompts,
        max_tokens=args.max_tokens,
        sampler=sampler,
        seed=args.seed,
        stop_token=_stop_token(args),
        num_samples=args.num_samples,
        cache=args.cache,
        details=True,
    )
    out = sys.stdout
    for index, generations in enumerate(results):
        if args.num_samples == 1:
            generations = [generations]
        for sample, g in enumerate(generations):
            if args.json:
                record = {"prompt_index": index, "sample": sample}
                out.write(json.dumps({**record, **g.to_dict()}) + "\n")
            else:
                out.write(escape_tsv_field(g.text) + "\n")
    return 0
