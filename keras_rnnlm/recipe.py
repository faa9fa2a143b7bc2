"""Recipes: named presets of a :class:`RunConfig` plus one call.

A recipe file (``recipes/*.py``) defines ``PRESETS`` (name -> nested dict
of config sections), ``DEFAULT_PRESET`` and calls :func:`main` under
``if __name__ == "__main__"``. The same file is accepted by
``keras-rnnlm train RECIPE.py --preset NAME``.
"""

import argparse
import importlib.util
import os

from keras_rnnlm.config import ConfigError
from keras_rnnlm.config import RunConfig
from keras_rnnlm.config import apply_overrides


def config_from_preset(presets, name, overrides=()):
    """Resolves a preset (plus ``section.key=value`` overrides)."""
    if name not in presets:
        raise ConfigError(
            f"Unknown preset {name!r}; available: {sorted(presets)}"
        )
    config = RunConfig.from_dict(presets[name])
    return apply_overrides(config, overrides)


def load_recipe(path):
    """Imports a recipe file by path; returns its module."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"Recipe file not found: {path}")
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(f"recipe_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, "PRESETS"):
        raise ConfigError(f"Recipe {path} defines no PRESETS")
    return module


def preset_name(**axes):
    """The preset name of a combination of axis values (``cell-size``)."""
    return "-".join(str(v) for v in axes.values())


def main(presets, default, description=None, argv=None, axes=None):
    """Command line of a recipe file: ``keras-rnnlm train`` on its presets.

    Accepts every option of ``keras-rnnlm train`` (``--preset``/``--size``,
    ``--set``, ``--out``, ``--data-dir``, ``--no-resume``,
    ``--print-config``).

    Args:
        presets: preset name -> nested config dict.
        default: the default preset name.
        description: ``--help`` text (the recipe's docstring).
        argv: arguments (default ``sys.argv[1:]``).
        axes: optional ``{flag: (choices, default)}``: presets named by
            several choices (e.g. ``{"cell": (...), "size": (...)}`` for
            ``--cell mlstm --size paper`` -> preset ``mlstm-paper``, see
            :func:`preset_name`); ``--preset NAME`` still selects a preset
            by its full name.
    """
    from keras_rnnlm.cli import run_train
    from keras_rnnlm.cli import train_parser

    parser = argparse.ArgumentParser(
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    train_parser(parser, preset_flags=("--preset",) if axes else None)
    for flag, (choices, value) in (axes or {}).items():
        parser.add_argument(f"--{flag}", choices=choices, default=value)
    args = parser.parse_args(argv)
    preset = args.preset
    if preset is None and axes:
        preset = preset_name(**{f: getattr(args, f) for f in axes})
    return run_train(args, presets, preset or default)
