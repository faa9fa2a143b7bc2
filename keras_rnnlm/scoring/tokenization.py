"""How a scorer turns a line of text into model tokens.

Two modes, matching how the corpora are read at training time
(:mod:`keras_rnnlm.data.corpus`):

* ``"whitespace"``: tokens are the line split on whitespace (word-level
  models, and character models trained on Mikolov's spaced ``ptb.char``
  format when the input is already spaced).
* ``"chars"``: every Unicode character is a token (character-level
  models). With ``space_token`` set (``"_"`` for ``ptb_char``, whose word
  boundary symbol it is), leading/trailing whitespace is dropped and each
  run of whitespace becomes one ``space_token``, so plain text
  ``"no it was"`` is scored as ``n o _ i t _ w a s``.

Input bytes are decoded as UTF-8 with invalid sequences replaced by U+FFFD
(which is then an out-of-vocabulary token), in Python and in the exported
graph alike.
"""

import dataclasses
import re

from keras_rnnlm.data import CORPORA

MODES = ("whitespace", "chars")
_WS = re.compile(r"\s+")


@dataclasses.dataclass(frozen=True)
class Tokenization:
    """A tokenisation mode (see module docstring)."""

    mode: str = "whitespace"
    space_token: str | None = None

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(
                f"Tokenization mode must be one of {MODES}, got {self.mode!r}"
            )
        if self.space_token is not None and self.mode != "chars":
            raise ValueError("space_token is only used with mode='chars'")

    def __call__(self, text):
        """Splits ``text`` (str or bytes) into a list of token strings."""
        if isinstance(text, (bytes, bytearray)):
            text = bytes(text).decode("utf-8", errors="replace")
        if not isinstance(text, str):
            raise TypeError(
                f"Expected a str or bytes sentence, got {type(text).__name__}"
            )
        text = text.rstrip("\n")
        if self.mode == "whitespace":
            return text.split()
        if self.space_token is not None:
            text = _WS.sub(" ", text.strip())
            return [self.space_token if c == " " else c for c in text]
        return list(text)

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d):
        return cls(**d)


def tokenization_for_run(config, vocab):
    """The tokenisation matching a run's corpus (and its vocabulary)."""
    if config.data.level != "char":
        spec = CORPORA.get(config.data.corpus)
        if spec is None or spec.level != "char":
            return Tokenization("whitespace")
    # Character models: spaced formats use a word-boundary symbol.
    if " " not in vocab and "_" in vocab:
        return Tokenization("chars", space_token="_")
    return Tokenization("chars")
