"""Preset builders shared by recipe files (recipes stay declarative)."""

from keras_rnnlm.presets.char_lm import char_lm_preset
from keras_rnnlm.presets.char_lm import char_lm_presets

__all__ = ["char_lm_preset", "char_lm_presets"]
