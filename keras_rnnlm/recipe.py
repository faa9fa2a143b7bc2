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


def main(presets, default, description=None, argv=None):
    """Command line of a recipe file: ``keras-rnnlm train`` on its presets.

    Accepts every option of ``keras-rnnlm train`` (``--preset``/``--size``,
    ``--set``, ``--out``, ``--data-dir``, ``--no-resume``,
    ``--print-config``).
    """
    from keras_rnnlm.cli import run_train
    from keras_rnnlm.cli import train_parser

    parser = train_parser(argparse.ArgumentParser(description=description))
    args = parser.parse_args(argv)
    return run_train(args, presets, args.preset or default)
