"""Resolving recipe presets into a :class:`RunConfig`.

A recipe file (``recipes/*.py``) defines ``PRESETS`` (name -> nested dict
of config sections) and ``DEFAULT_PRESET``, and calls
:func:`keras_rnnlm.cli.recipe_main` under ``if __name__ == "__main__"``.
This module only finds and resolves presets; the command line lives in
:mod:`keras_rnnlm.cli`.
"""

import errno
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
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(f"recipe_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, "PRESETS"):
        raise ConfigError(f"Recipe {path} defines no PRESETS")
    return module


def preset_name(**axes):
    """The preset name of a combination of axis values (``cell-size``).

    An axis whose value is ``None`` is left out of the name (an optional
    axis: ``preset_name(size="small", variant=None) == "small"``).
    """
    return "-".join(str(v) for v in axes.values() if v is not None)
