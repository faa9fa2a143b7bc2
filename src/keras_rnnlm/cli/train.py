"""``keras-rnnlm train`` and ``finetune``, and the command line of recipe
files (:func:`recipe_main`).

A recipe file (``recipes/*.py``) is a docstring, ``PRESETS`` (name ->
nested config dict), ``DEFAULT_PRESET`` and one call,
``recipe_main(PRESETS, DEFAULT_PRESET, __doc__)``. The same file is
accepted by ``keras-rnnlm train RECIPE.py --preset NAME``; both spellings
take the same options and follow the same error policy.
"""

import argparse
import contextlib
import json
import os
import sys
import textwrap

from keras_rnnlm.cli.errors import UsageError
from keras_rnnlm.cli.errors import debug_requested
from keras_rnnlm.cli.errors import resume_command
from keras_rnnlm.cli.errors import run_reporting_errors
from keras_rnnlm.cli.process import prepare_process
from keras_rnnlm.config import ConfigError
from keras_rnnlm.config import apply_overrides
from keras_rnnlm.config import given_by
from keras_rnnlm.config import load_config
from keras_rnnlm.config import override_keys
from keras_rnnlm.data.corpus import check_corpus_fits
from keras_rnnlm.data.errors import CorpusTooShortError
from keras_rnnlm.models import validate_model_config
from keras_rnnlm.recipe import config_from_preset
from keras_rnnlm.recipe import load_recipe
from keras_rnnlm.recipe import preset_name
from keras_rnnlm.runs import load_run_corpus
from keras_rnnlm.training import train
from keras_rnnlm.training.finetune import finetune
from keras_rnnlm.training.pretrained import TRAIN as TRAIN_WORD2VEC
from keras_rnnlm.training.pretrained import ensure_run_word2vec
from keras_rnnlm.training.pretrained import with_pretrained
from keras_rnnlm_launcher.commands import ENVIRONMENT
from keras_rnnlm_launcher.commands import add_debug_flag
from keras_rnnlm_launcher.commands import add_train_options


def options_of(args, names):
    """``{name: args.name}`` for the parsed options ``names`` (a list or a
    space-separated string): options passed on under their own names."""
    if isinstance(names, str):
        names = names.split()
    return {name: getattr(args, name) for name in names}


def resolve_config(args, presets=None, preset=None):
    """The run config named by parsed ``train`` arguments.

    ``presets``/``preset`` come from a recipe's own command line;
    otherwise ``args.recipe`` or ``args.config`` names the source.
    """
    overrides = list(args.overrides)
    if args.data_dir:
        overrides.append(f"data.data_dir={args.data_dir}")
    if args.out:
        overrides.append(f"train.out_dir={args.out}")
    if args.distribute:
        overrides.append(f"train.distribute={args.distribute}")
    if presets is None and getattr(args, "config", None):
        if getattr(args, "recipe", None) or args.preset:
            raise UsageError("give a RECIPE (with --preset) or --config")
        return apply_overrides(load_config(args.config), overrides)
    if presets is None:
        if not getattr(args, "recipe", None):
            raise UsageError("train needs a RECIPE file or --config FILE")
        module = load_recipe(args.recipe)
        presets = module.PRESETS
        preset = args.preset or getattr(module, "DEFAULT_PRESET", None)
    return config_from_preset(presets, preset, overrides)


def run_train(args, presets=None, preset=None):
    """Resolves the config from parsed ``train`` arguments, checks it and
    the corpus before anything is written, and trains."""
    with naming_set_options(args.overrides):
        config = resolve_config(args, presets, preset)
        if args.pretrained:
            config = with_pretrained(config, args.pretrained)
        validate_model_config(config.model)
        if args.print_config:
            print(json.dumps(printed_config(config), indent=2, sort_keys=True))
            return 0
        out = config.train.out_dir
        if os.path.exists(out) and not os.path.isdir(out):
            raise UsageError(
                f"{out} is a file, not a run directory: give another --out "
                "(train.out_dir)"
            )
        # Every split, before the run directory is touched: a short
        # valid.txt is not found only after an epoch of training.
        corpus = load_run_corpus(config)
        check_corpus_fits(corpus, config.data)
    if args.pretrained == TRAIN_WORD2VEC:
        ensure_run_word2vec(config, corpus, resume=not args.no_resume)
    del corpus  # the trainer loads its own
    train(
        config,
        resume=not args.no_resume,
        reevaluate=getattr(args, "reevaluate", False),
    )
    return 0


@contextlib.contextmanager
def naming_set_options(overrides):
    """An error about a config key given with ``--set`` (``overrides``)
    names the option: ``--set model.cell: unknown recurrent layer ...``."""
    keys = override_keys(overrides)
    try:
        yield
    except (ConfigError, CorpusTooShortError) as e:
        if not given_by(e.key, keys):
            raise
        message = str(e)
        if not message.startswith(e.key):
            message = f"{e.key}: {message}"
        raise type(e)(f"--set {message}", key=e.key) from e


def printed_config(config):
    """The config ``--print-config`` shows: the run's, without the values
    its model ignores (``model.embedding_dim`` of a one-hot input); it
    loads back (``--config``) as the same config."""
    d = config.to_dict()
    if d["model"].get("input_encoding") == "one_hot":
        d["model"].pop("embedding_dim", None)
    return d


def run_finetune(args):
    """``keras-rnnlm finetune``: rounds of averaged SGD from a run's best
    weights; prints each round's summary."""
    rounds = finetune(
        args.run_dir, args.rounds, args.overrides, resume=not args.no_resume
    )
    print(json.dumps([{k: r[k] for k in r if k != "results"} for r in rounds]))
    return 0


def recipe_main(presets, default, description=None, argv=None, axes=None):
    """The command line of a recipe file: ``keras-rnnlm train`` on its
    presets, with the command line's error policy.

    Args:
        presets: preset name -> nested config dict.
        default: the default preset name.
        description: ``--help`` text (the recipe's docstring).
        argv: arguments (default ``sys.argv[1:]``).
        axes: optional ``{flag: (choices, default)}``: presets named by
            several choices (e.g. ``{"cell": (...), "size": (...)}`` for
            ``--cell mlstm --size paper`` -> preset ``mlstm-paper``, see
            :func:`~keras_rnnlm.recipe.preset_name`); ``--preset NAME``
            still selects a preset by its full name (giving both is a
            usage error).

    Returns the exit status (0, or 2 after a user error; 130 or 143 after
    Ctrl-C or SIGTERM). Messages start with the script's name. Training
    first sets the process up (:func:`keras_rnnlm.cli.process.
    prepare_process`: glibc's allocator, whose defaults the help's epilog
    says how to keep, and the compile cache).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    axes = dict(axes or {})
    parser = recipe_parser(presets, default, description, axes)
    args = parser.parse_args(argv)
    script = getattr(sys.modules.get("__main__"), "__file__", None)
    program = ["python", script or parser.prog]

    def run():
        prepare_process()
        given = [f for f in axes if hasattr(args, f)]
        if args.preset is not None and given:
            flags = " ".join(f"--{f} {getattr(args, f)}" for f in given)
            raise UsageError(
                f"--preset {args.preset} and {flags} both choose a preset: "
                f"give --preset NAME or the {_axis_flags(axes)} choices"
            )
        preset = args.preset
        if preset is None and axes:
            preset = preset_name(
                **{f: getattr(args, f, v) for f, (_, v) in axes.items()}
            )
        return run_train(args, presets, preset or default)

    return run_reporting_errors(
        "train",
        run,
        args.debug or debug_requested([]),
        prog=parser.prog,
        resume=resume_command(argv, program),
    )


def recipe_parser(presets, default, description=None, axes=None):
    """The parser of a recipe file's command line (see
    :func:`recipe_main`): the train options, ``--preset`` listing the
    preset names, and a flag with help per axis."""
    axes = dict(axes or {})
    parser = argparse.ArgumentParser(
        description=description,
        formatter_class=_RecipeHelpFormatter,
        epilog=textwrap.fill(ENVIRONMENT),
    )
    names = [default, *(name for name in presets if name != default)]
    add_train_options(parser, presets=names)
    add_debug_flag(parser)
    for flag, (choices, value) in axes.items():
        parser.add_argument(
            f"--{flag}",
            choices=choices,
            default=argparse.SUPPRESS,
            help=_axis_help(flag, axes, value),
        )
    return parser


class _RecipeHelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The recipe's docstring as written; option help wrapped between
    words only (a preset name such as ``mgru-paper`` stays whole)."""

    def _split_lines(self, text, width):
        text = " ".join(text.split())
        return textwrap.wrap(text, width, break_on_hyphens=False)


def _axis_flags(axes):
    return " ".join(f"--{f}" for f in axes)


def _axis_help(flag, axes, value):
    name = "-".join(f.upper() for f in axes)
    default = "none" if value is None else value
    return (
        f"the {flag} of the preset {name} (default: {default}; "
        f"or --preset NAME)"
    )
