"""Presets of the recipe files: nested config dicts, plain data where a
function adds nothing, and :func:`merge` to derive one from another."""

from keras_rnnlm.presets.char_lm import char_lm_preset
from keras_rnnlm.presets.char_lm import char_lm_presets
from keras_rnnlm.presets.merge import merge

__all__ = ["char_lm_preset", "char_lm_presets", "merge"]
