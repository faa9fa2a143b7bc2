"""``keras-rnnlm train`` and ``finetune``, and the command line of recipe
files (:func:`recipe_main`).

A recipe file (``recipes/*.py``) is a docstring, ``PRESETS`` (name ->
nested config dict), ``DEFAULT_PRESET`` and one call,
``recipe_main(PRESETS, DEFAULT_PRESET, __doc__)``. The same file is
accepted by ``keras-rnnlm train RECIPE.py --preset NAME``; both spellings
take the same options and follow the same error policy.
"""

import argparse
import json
import sys
import textwrap

from keras_rnnlm._malloc import tune_malloc
from keras_rnnlm.cli.errors import UsageError
from keras_rnnlm.cli.errors import debug_requested
from keras_rnnlm.cli.errors import run_reporting_errors
from keras_rnnlm.config import apply_overrides
from keras_rnnlm.config import load_config
from keras_rnnlm.recipe import config_from_preset
from keras_rnnlm.recipe import load_recipe
from keras_rnnlm.recipe import preset_name
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
    """Resolves the config from parsed ``train`` arguments and trains."""
    config = resolve_config(args, presets, preset)
    if args.pretrained:
        config = with_pretrained(config, args.pretrained)
    if args.print_config:
        print(config.to_json())
        return 0
    if args.pretrained == TRAIN_WORD2VEC:
        ensure_run_word2vec(config, resume=not args.no_resume)
    train(config, resume=not args.no_resume)
    return 0


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
            still selects a preset by its full name.

    Returns the exit status (0, or 2 after a user error). Training first
    sets glibc's allocator (:func:`keras_rnnlm._malloc.tune_malloc`; the
    help's epilog says how to keep glibc's defaults).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=textwrap.fill(ENVIRONMENT),
    )
    add_train_options(parser)
    add_debug_flag(parser)
    for flag, (choices, value) in (axes or {}).items():
        parser.add_argument(f"--{flag}", choices=choices, default=value)
    args = parser.parse_args(argv)

    def run():
        tune_malloc()
        preset = args.preset
        if preset is None and axes:
            preset = preset_name(**{f: getattr(args, f) for f in axes})
        return run_train(args, presets, preset or default)

    return run_reporting_errors("train", run, args.debug or debug_requested([]))
