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


def add_debug_flag(parser):
    parser.add_argument(
        "--debug",
        action="store_true",
        help="show the Python traceback of an error",
    )


def add_command(sub, func, name, **kwargs):
    """A ``keras-rnnlm`` verb: the subparser ``name`` (``kwargs`` go to
    ``add_parser``) running ``func(args)``, with ``--debug``."""
    parser = sub.add_parser(name, **kwargs)
    add_debug_flag(parser)
    parser.set_defaults(func=func)
    return parser


def options_of(args, names):
    """``{name: args.name}`` for the parsed options ``names`` (a list or a
    space-separated string): options passed on under their own names."""
    if isinstance(names, str):
        names = names.split()
    return {name: getattr(args, name) for name in names}


def add_set_option(parser, help=None):
    """``--set section.key=value`` (repeatable): config overrides."""
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help=help
        or "override a config value (JSON), e.g. --set train.epochs=2",
    )


def add_train_options(parser, preset_flags=("--preset",)):
    """Adds the options shared by ``keras-rnnlm train`` and recipe files.

    ``--preset NAME`` selects one of the recipe's presets (a named
    configuration); ``--set section.key=value`` overrides one value.
    """
    parser.add_argument(
        *preset_flags, dest="preset", help="the recipe preset to train"
    )
    add_set_option(parser)
    parser.add_argument("--out", help="run directory (train.out_dir)")
    parser.add_argument(
        "--data-dir", help="corpus root (else $KERAS_RNNLM_DATA, cache)"
    )
    parser.add_argument(
        "--no-resume",
        action="store_true",
        help="start from scratch even if the run directory has a checkpoint",
    )
    parser.add_argument(
        "--distribute",
        choices=("none", "data_parallel"),
        help="train.distribute: data_parallel splits the streams over "
        "every device (JAX backend; docs/distributed.md)",
    )
    parser.add_argument(
        "--print-config",
        action="store_true",
        help="print the resolved config and exit",
    )
    parser.add_argument(
        "--pretrained",
        metavar="FILE|train",
        help="start from word2vec embeddings (model.pretrained_embeddings; "
        "the CBOW context table too when the model has one): a word2vec "
        "FILE (text, or binary if named .bin), or 'train': first train "
        "gensim word2vec of model.embedding_dim on the run's training "
        "split, kept in the run directory (the paper does not say what "
        "text its embeddings were trained on)",
    )
    return parser


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


def add_train_command(sub):
    t = add_command(
        sub, run_train, "train", help="train a recipe preset or a config"
    )
    t.add_argument("recipe", nargs="?", help="recipe file (recipes/*.py)")
    t.add_argument("--config", help="a config.json (e.g. of an earlier run)")
    add_train_options(t)


def _finetune(args):
    rounds = finetune(
        args.run_dir, args.rounds, args.overrides, resume=not args.no_resume
    )
    print(json.dumps([{k: r[k] for k in r if k != "results"} for r in rounds]))
    return 0


def add_finetune_command(sub):
    f = add_command(
        sub,
        _finetune,
        "finetune",
        help="AWD-LSTM finetuning: averaged SGD from a run's best weights",
    )
    f.add_argument("run_dir")
    f.add_argument("--rounds", type=int, default=1, help="finetuning rounds")
    add_set_option(f, "override a value of the finetuning config")
    f.add_argument("--no-resume", action="store_true")


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

    Returns the exit status (0, or 2 after a user error).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_train_options(parser)
    add_debug_flag(parser)
    for flag, (choices, value) in (axes or {}).items():
        parser.add_argument(f"--{flag}", choices=choices, default=value)
    args = parser.parse_args(argv)

    def run():
        preset = args.preset
        if preset is None and axes:
            preset = preset_name(**{f: getattr(args, f) for f in axes})
        return run_train(args, presets, preset or default)

    return run_reporting_errors("train", run, args.debug or debug_requested([]))
