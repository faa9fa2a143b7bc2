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


def config_from_preset(presets, name, overrides=(), out_dir=None):
    """Resolves a preset (plus ``section.key=value`` overrides)."""
    if name not in presets:
        raise ConfigError(
            f"Unknown preset {name!r}; available: {sorted(presets)}"
        )
    config = RunConfig.from_dict(presets[name])
    config = apply_overrides(config, overrides)
    if out_dir:
        config = apply_overrides(config, [f"train.out_dir={out_dir}"])
    return config


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


def add_run_arguments(parser, presets, default):
    parser.add_argument(
        "--preset",
        "--size",
        dest="preset",
        default=default,
        choices=sorted(presets),
        help="hyperparameter preset (default: %(default)s)",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override a config value (JSON), e.g. --set train.epochs=2",
    )
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
        "--print-config",
        action="store_true",
        help="print the resolved config and exit",
    )


def run_from_args(args, presets):
    from keras_rnnlm.training import train

    overrides = list(args.overrides)
    if args.data_dir:
        overrides.append(f"data.data_dir={args.data_dir}")
    config = config_from_preset(presets, args.preset, overrides, args.out)
    if args.print_config:
        print(config.to_json())
        return None
    return train(config, resume=not args.no_resume)


def main(presets, default, description=None, argv=None):
    """Command line of a recipe file."""
    parser = argparse.ArgumentParser(description=description)
    add_run_arguments(parser, presets, default)
    args = parser.parse_args(argv)
    return run_from_args(args, presets)
