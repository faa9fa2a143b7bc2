"""Token vocabularies: a fixed, ordered list of token strings.

A `Vocabulary` maps token strings to contiguous integer ids (the id of a
token is its position in the list) and back. It serialises to a small,
human-readable JSON document so that a trained model can be shipped with
the exact id mapping it was trained on.

`build_vocabulary` builds one from tokenised lines. Its default order is the
order in which tokens are first seen (as pytorch/examples and awd-lstm-lm
do), which makes ids deterministic for a given training file.

Example:

>>> vocab = build_vocabulary([["the", "cat"], ["the", "dog"]])
>>> vocab.tokens
['the', 'cat', '<eos>', 'dog', '<unk>']
>>> vocab.encode(["the", "bird"]).tolist()
[0, 4]
"""

import collections
import itertools
import json
import os

import numpy as np

from keras_rnnlm.data.errors import OOVError
from keras_rnnlm.data.errors import VocabularyFormatError

FORMAT_NAME = "keras_rnnlm.vocabulary"
FORMAT_VERSION = 1


class Vocabulary:
    """An ordered token vocabulary with optional `<unk>` and `<eos>` tokens.

    Args:
        tokens: The token strings; the id of a token is its index. Tokens
            must be unique strings.
        unk_token: The token that out-of-vocabulary tokens map to. If it is
            not in `tokens`, `unk_id` is `None` and encoding an OOV token
            raises `OOVError`.
        eos_token: The end-of-sentence token (`eos_id` is `None` if it is
            not in `tokens`).

    Example:

    >>> vocab = Vocabulary(["a", "b", "<unk>"])
    >>> vocab.encode(["b", "zzz"]).tolist()
    [1, 2]
    >>> vocab.decode([0, 1])
    ['a', 'b']
    """

    def __init__(self, tokens, unk_token="<unk>", eos_token="<eos>"):
        tokens = list(tokens)
        for token in tokens:
            if not isinstance(token, str):
                raise TypeError(
                    f"Vocabulary tokens must be str, got {token!r} "
                    f"({type(token).__name__})."
                )
        index = {token: i for i, token in enumerate(tokens)}
        if len(index) != len(tokens):
            dupes = [t for t, c in collections.Counter(tokens).items() if c > 1]
            raise ValueError(f"Duplicate vocabulary tokens: {dupes[:10]}")
        self._tokens = tokens
        self._index = index
        self._unk_token = unk_token
        self._eos_token = eos_token

    def __len__(self):
        return len(self._tokens)

    def __contains__(self, token):
        return token in self._index

    def __iter__(self):
        return iter(self._tokens)

    def __eq__(self, other):
        if not isinstance(other, Vocabulary):
            return NotImplemented
        return (
            self._tokens == other._tokens
            and self._unk_token == other._unk_token
            and self._eos_token == other._eos_token
        )

    def __hash__(self):
        return hash((tuple(self._tokens), self._unk_token, self._eos_token))

    def __repr__(self):
        head = ", ".join(repr(t) for t in self._tokens[:5])
        more = ", ..." if len(self) > 5 else ""
        return f"Vocabulary(size={len(self)}, tokens=[{head}{more}])"

    @property
    def tokens(self):
        """A copy of the token list, in id order."""
        return list(self._tokens)

    @property
    def unk_token(self):
        """The unknown-token string (may be absent from the vocabulary)."""
        return self._unk_token

    @property
    def eos_token(self):
        """The end-of-sentence string (may be absent from the vocabulary)."""
        return self._eos_token

    @property
    def unk_id(self):
        """The id of `unk_token`, or `None` if it is not in the vocabulary."""
        return self._index.get(self._unk_token)

    @property
    def eos_id(self):
        """The id of `eos_token`, or `None` if it is not in the vocabulary."""
        return self._index.get(self._eos_token)

    def token_to_id(self, token):
        """Returns the id of `token`; raises `OOVError` if it is absent."""
        try:
            return self._index[token]
        except KeyError:
            raise OOVError(
                f"Token {token!r} is not in the vocabulary "
                f"({len(self)} tokens)."
            ) from None

    def id_to_token(self, token_id):
        """Returns the token with id `token_id`; raises `IndexError`."""
        token_id = int(token_id)
        if not 0 <= token_id < len(self._tokens):
            raise IndexError(
                f"Token id {token_id} out of range [0, {len(self._tokens)})."
            )
        return self._tokens[token_id]

    def is_oov(self, token):
        """Whether `token` is out of vocabulary."""
        return token not in self._index

    def encode(self, tokens, oov="unk"):
        """Maps token strings to ids.

        Args:
            tokens: An iterable of token strings.
            oov: `"unk"` (default) maps out-of-vocabulary tokens to `unk_id`;
                `"error"` raises `OOVError` on the first one.

        Returns:
            A 1-D `np.int32` array of ids.

        Raises:
            OOVError: an OOV token occurs and `oov="error"` or the vocabulary
                has no unknown token.
        """
        if oov not in ("unk", "error"):
            raise ValueError(f"oov must be 'unk' or 'error', got {oov!r}")
        tokens = tokens if isinstance(tokens, list) else list(tokens)
        get = self._index.__getitem__
        try:
            return np.fromiter(map(get, tokens), np.int32, count=len(tokens))
        except KeyError as e:
            first_oov = e.args[0]
        unk = self.unk_id
        if oov == "error" or unk is None:
            reason = (
                "oov='error'"
                if oov == "error"
                else f"the vocabulary has no unknown token {self._unk_token!r}"
            )
            raise OOVError(
                f"Token {first_oov!r} is not in the vocabulary and cannot be "
                f"mapped to an unknown token ({reason})."
            )
        get = self._index.get
        return np.fromiter(
            (get(t, unk) for t in tokens), np.int32, count=len(tokens)
        )

    def decode(self, ids):
        """Maps ids (any integer iterable or array) to token strings."""
        ids = np.asarray(ids).reshape(-1)
        return [self.id_to_token(i) for i in ids.tolist()]

    def get_config(self):
        """Returns the JSON-serialisable description of this vocabulary."""
        return {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "size": len(self),
            "unk_token": self._unk_token,
            "eos_token": self._eos_token,
            "tokens": list(self._tokens),
        }

    def to_json(self):
        """Serialises the vocabulary to an indented, human-readable string."""
        config = self.get_config()
        tokens = config.pop("tokens")
        # One token per line keeps the file diffable and readable.
        head = json.dumps(config, indent=2, ensure_ascii=False)[:-2]
        body = ",\n".join(
            "    " + json.dumps(t, ensure_ascii=False) for t in tokens
        )
        return f'{head},\n  "tokens": [\n{body}\n  ]\n}}\n'

    @classmethod
    def from_json(cls, text):
        """Rebuilds a vocabulary from `to_json` output.

        Raises:
            VocabularyFormatError: (a `ValueError`) if the text is not valid
                JSON or does not describe a vocabulary of a known format.
        """
        try:
            config = json.loads(text)
        except (json.JSONDecodeError, TypeError) as e:
            raise VocabularyFormatError(
                f"Malformed vocabulary JSON: {e}"
            ) from None
        return cls.from_config(config)

    @classmethod
    def from_config(cls, config):
        """Rebuilds a vocabulary from `get_config` output (validated)."""
        if not isinstance(config, dict):
            raise VocabularyFormatError(
                "A vocabulary JSON document must be an object, got "
                f"{type(config).__name__}."
            )
        if config.get("format") != FORMAT_NAME:
            raise VocabularyFormatError(
                f"Not a vocabulary document: format={config.get('format')!r},"
                f" expected {FORMAT_NAME!r}."
            )
        version = config.get("format_version")
        if version != FORMAT_VERSION:
            raise VocabularyFormatError(
                f"Unsupported vocabulary format_version {version!r} "
                f"(supported: {FORMAT_VERSION})."
            )
        tokens = config.get("tokens")
        if not isinstance(tokens, list) or not all(
            isinstance(t, str) for t in tokens
        ):
            raise VocabularyFormatError(
                "Vocabulary 'tokens' must be a list of strings."
            )
        if "size" in config and config["size"] != len(tokens):
            raise VocabularyFormatError(
                f"Vocabulary 'size' is {config['size']} but it lists "
                f"{len(tokens)} tokens."
            )
        for key in ("unk_token", "eos_token"):
            value = config.get(key)
            if value is not None and not isinstance(value, str):
                raise VocabularyFormatError(f"{key!r} must be a string.")
        try:
            return cls(
                tokens,
                unk_token=config.get("unk_token"),
                eos_token=config.get("eos_token"),
            )
        except ValueError as e:
            raise VocabularyFormatError(str(e)) from None

    def save(self, path):
        """Writes `to_json()` to `path` (UTF-8)."""
        with open(os.fspath(path), "w", encoding="utf-8") as f:
            f.write(self.to_json())

    @classmethod
    def load(cls, path):
        """Reads a vocabulary written by `save`."""
        with open(os.fspath(path), encoding="utf-8") as f:
            return cls.from_json(f.read())


def build_vocabulary(
    token_lines,
    add_eos=True,
    unk_token="<unk>",
    eos_token="<eos>",
    min_count=1,
    order="first_seen",
):
    """Builds a `Vocabulary` from tokenised lines.

    Args:
        token_lines: An iterable of token lists (one list per line).
        add_eos: Whether each line ends with `eos_token` (as the corpus
            reader emits it), so that `eos_token` gets an id.
        unk_token: Always included (appended at the end if the data does
            not contain it), so that OOV tokens can be mapped. `None` builds
            a vocabulary without an unknown token.
        eos_token: The end-of-sentence token.
        min_count: Tokens seen fewer times are left out (they will map to
            `unk_token`). The special tokens are always kept.
        order: `"first_seen"` (default; deterministic and identical to
            pytorch/examples and awd-lstm-lm) or `"frequency"` (most
            frequent first, ties in first-seen order).

    Returns:
        A `Vocabulary`.
    """
    if order not in ("first_seen", "frequency"):
        raise ValueError(
            f"order must be 'first_seen' or 'frequency', got {order!r}"
        )
    if add_eos:
        eos = [eos_token]
        stream = itertools.chain.from_iterable(
            itertools.chain(line, eos) for line in token_lines
        )
    else:
        stream = itertools.chain.from_iterable(token_lines)
    return _vocabulary_from_stream(
        stream, add_eos, unk_token, eos_token, min_count, order
    )


def _vocabulary_from_stream(
    stream, add_eos, unk_token, eos_token, min_count, order
):
    """`build_vocabulary` on a flat token stream (fast path for corpora)."""
    if min_count < 1:
        raise ValueError(f"min_count must be >= 1, got {min_count}")
    special = {eos_token} if add_eos else set()
    if unk_token is not None:
        special.add(unk_token)
    if order == "first_seen" and min_count == 1:
        # dict.fromkeys keeps first-seen order and runs at C speed.
        tokens = list(dict.fromkeys(stream))
    else:
        counts = collections.Counter(stream)  # insertion = first-seen order
        tokens = [
            t for t, c in counts.items() if c >= min_count or t in special
        ]
        if order == "frequency":
            tokens.sort(key=lambda t: -counts[t])  # stable: ties first-seen
    present = set(tokens)
    if add_eos and eos_token not in present:
        tokens.append(eos_token)
    if unk_token is not None and unk_token not in present:
        tokens.append(unk_token)
    return Vocabulary(tokens, unk_token=unk_token, eos_token=eos_token)
