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

**One input contract** for every scoring path (:class:`Scorer`,
:class:`SavedModelScorer`, ``keras-rnnlm score``), :func:`sentence_text`:

* a sentence is a ``str`` or ``bytes``; anything else (``None``, a
  number, a list) is a ``TypeError`` naming its type; a single string
  where a list of sentences is expected is a ``TypeError`` too;
* bytes are decoded as UTF-8 with invalid sequences replaced by U+FFFD,
  and a lone surrogate in a ``str`` (not encodable as UTF-8) is replaced
  by U+FFFD: either is then an out-of-vocabulary token, never an error.
  This is done in Python before the text reaches a model or an exported
  graph, so every path sees the same characters;
* NUL and other control characters are ordinary characters (inside a
  token: an out-of-vocabulary one) except those that Python's
  ``str.split()`` treats as whitespace (tab, CR, U+001C..U+001F, ...),
  which separate tokens; trailing newlines are dropped.
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
        text = sentence_text(text).rstrip("\n")
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


def sentence_text(sentence):
    """A sentence as the text every scoring path scores (see the module
    docstring): ``str`` or UTF-8 ``bytes``, invalid bytes and lone
    surrogates replaced by U+FFFD; ``TypeError`` for anything else."""
    if isinstance(sentence, (bytes, bytearray)):
        return bytes(sentence).decode("utf-8", errors="replace")
    if not isinstance(sentence, str):
        raise TypeError(
            f"Expected a str or bytes sentence, got {type(sentence).__name__}"
        )
    try:
        sentence.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", sentence)
    return sentence


_SURROGATE = re.compile("[\ud800-\udfff]")


def sentence_texts(sentences):
    """:func:`sentence_text` of each of a list (any iterable) of
    sentences; a single ``str``/``bytes`` or a non-iterable is a
    ``TypeError``."""
    return list(iter_sentence_texts(sentences))


def iter_sentence_texts(sentences):
    """:func:`sentence_texts` read lazily: the container is checked
    now, each item (:func:`sentence_text`) as it is reached."""
    if isinstance(sentences, (str, bytes, bytearray)):
        raise TypeError(
            "Expected a list of sentences, got a single "
            f"{type(sentences).__name__}"
        )
    try:
        items = iter(sentences)
    except TypeError:
        raise TypeError(
            f"Expected a list of sentences, got {type(sentences).__name__}"
        ) from None
    return map(sentence_text, items)


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
