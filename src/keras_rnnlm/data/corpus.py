"""Reading language-modeling corpora into id arrays.

`load_corpus` turns a registered benchmark corpus (see `CORPORA`) or a
directory of plain-text files into a `Corpus`: a `Vocabulary` built from the
training split and one 1-D `np.int32` id array per split.

Tokenisation follows the reference implementations (pytorch/examples,
awd-lstm-lm, the TensorFlow PTB reader) exactly:

- a file is split into lines on `"\\n"` only (a final newline does not start
  an extra empty line);
- word level: each line is split on whitespace (`str.split()`);
- character level, `"spaced"` format (Mikolov's `ptb.char.*`): symbols are
  separated by spaces, so `str.split()` as well;
- character level, `"raw"` format (text8, plain text): every character of
  the line is a symbol;
- when the corpus uses end-of-sentence tokens, every line, blank lines
  included, ends with one `<eos>`. The published WikiText-2 counts
  (2,088,628 / 217,646 / 245,569) assume exactly this. Text after the last
  `"\n"` is a line of its own only if it holds a symbol: whitespace there
  is ignored at word level and in the spaced char format (Mikolov's
  `ptb.char.*` files end with `"\n "`), while in the raw char format any
  character is a symbol.

Example:

>>> corpus = load_corpus("ptb", data_dir="/data")  # doctest: +SKIP
>>> len(corpus.vocab), corpus.train.shape
(10000, (929589,))
"""

import codecs
import dataclasses
import errno
import os
import pathlib

import numpy as np

from keras_rnnlm.data.download import _cached_sha256
from keras_rnnlm.data.download import resolve_corpus_files
from keras_rnnlm.data.errors import CorpusEncodingError
from keras_rnnlm.data.errors import CorpusNotFoundError
from keras_rnnlm.data.errors import CorpusTooShortError
from keras_rnnlm.data.errors import EmptyCorpusError
from keras_rnnlm.data.errors import OOVError
from keras_rnnlm.data.errors import UnknownCorpusError
from keras_rnnlm.data.registry import CORPORA
from keras_rnnlm.data.registry import SPLITS
from keras_rnnlm.data.registry import get_corpus_spec
from keras_rnnlm.data.vocabulary import Vocabulary

UNK_TOKEN = "<unk>"
EOS_TOKEN = "<eos>"
_NEWLINE = 10  # code point of "\n"; stands for <eos> in raw-char streams.


def tokenize_line(line, level="word", char_format=None):
    """Splits one line (without its `<eos>`) into tokens.

    Args:
        line: The line, with or without its trailing `"\\n"`.
        level: `"word"` or `"char"`.
        char_format: For `level="char"`: `"spaced"` (symbols separated by
            spaces, as in Mikolov's `ptb.char.*`) or `"raw"` (every
            character is a symbol).

    Returns:
        A list of token strings.
    """
    if level == "word" or (level == "char" and char_format == "spaced"):
        return line.split()
    if level == "char" and char_format == "raw":
        return list(line.rstrip("\n"))
    raise ValueError(
        f"Unsupported level/char_format: {level!r}/{char_format!r}"
    )


@dataclasses.dataclass
class Corpus:
    """A tokenised corpus: a vocabulary and one id array per split.

    Attributes:
        name: Registry name, or the directory path for plain-text corpora.
        level: `"word"` or `"char"`.
        vocab: The `Vocabulary` (built from the training split unless one
            was given to `load_corpus`).
        train: 1-D `np.int32` ids of the training split.
        valid: 1-D `np.int32` ids of the validation split.
        test: 1-D `np.int32` ids of the test split.
        meta: Provenance and statistics: file paths, SHA-256s, token counts
            and the reading options.
    """

    name: str
    level: str
    vocab: Vocabulary
    train: np.ndarray
    valid: np.ndarray
    test: np.ndarray
    meta: dict = dataclasses.field(default_factory=dict)

    def split(self, name):
        """Returns the id array of split `name` (`train`, `valid`, `test`)."""
        if name not in SPLITS:
            raise KeyError(
                f"Unknown split {name!r}; expected one of {', '.join(SPLITS)}."
            )
        return getattr(self, name)

    @property
    def is_char_level(self):
        """Whether the tokens are characters."""
        return self.level == "char"

    def __repr__(self):
        sizes = ", ".join(f"{s}={len(self.split(s))}" for s in SPLITS)
        return (
            f"Corpus(name={self.name!r}, level={self.level!r}, "
            f"vocab_size={len(self.vocab)}, {sizes})"
        )


#: Characters of a split's text tokenised at a time (:class:`_Tokens`).
PIECE_CHARS = 1 << 16


class _Tokens:
    """The tokens of one split, a piece of its text at a time.

    A piece is :data:`PIECE_CHARS` characters of the text, up to the end
    of a line: its tokens are Python strings while it is read, the whole
    split's never are. A string a token (some 60 bytes each: 70 MB for
    PTB's million tokens) would be freed after the load, but Python's
    allocator would keep most of that memory for the rest of the process,
    pinned by the vocabulary's strings among them. ``start`` / ``stop``:
    the tokens of a slice (a split of one file).
    """

    def __init__(self, text, add_eos, eos_token):
        # A trailing segment without "\n" is a line only if it holds a
        # token (Mikolov's ptb.char files end with "\n ").
        if add_eos and text[text.rfind("\n") + 1 :].strip():
            text += "\n"
        self.text = text
        self.eos_token = eos_token if add_eos else None
        self.start, self.stop = 0, None

    def pieces(self):
        """The tokens, a list a piece of text: the same tokens as
        ``line.split() + [eos]`` a line (blank lines included) or
        ``text.split()``, at C speed."""
        text, eos = self.text, self.eos_token
        begin = seen = 0  # text position, tokens before it
        while begin < len(text) and (self.stop is None or seen < self.stop):
            end = text.find("\n", begin + PIECE_CHARS) + 1 or len(text)
            piece = text[begin:end]
            if eos is not None:
                piece = piece.replace("\n", f" {eos} ")
            tokens = piece.split()
            lo = max(self.start - seen, 0)
            hi = len(tokens) if self.stop is None else self.stop - seen
            seen, begin = seen + len(tokens), end
            if lo < min(hi, len(tokens)):
                yield tokens if (lo, hi) == (0, len(tokens)) else tokens[lo:hi]

    def __len__(self):
        return sum(map(len, self.pieces()))

    def has_symbols(self):
        """Whether a token other than ``<eos>`` is there (a piece's
        worth of text read for a corpus that has one)."""
        eos = self.eos_token
        return any(len(t) > t.count(eos) for t in self.pieces())

    def first_seen(self):
        seen = {}
        for tokens in self.pieces():
            seen.update(dict.fromkeys(tokens))  # a seen key keeps its place
        return list(seen)

    def types(self):
        return set().union(*self.pieces())

    def slice(self, start, stop):
        out = object.__new__(_Tokens)
        out.text, out.eos_token = self.text, self.eos_token
        out.start = self.start + start
        out.stop = self.start + stop
        if self.stop is not None:
            out.stop = min(out.stop, self.stop)
        return out

    def encode(self, vocab):
        ids = [vocab.encode(tokens) for tokens in self.pieces()]
        return np.concatenate(ids) if ids else np.zeros(0, np.int32)


class _Chars:
    """The characters of one split as an array of code points.

    With `add_eos`, the code point of `"\\n"` stands for `<eos>` (a line
    break is never a symbol then).
    """

    def __init__(self, text, add_eos, eos_token):
        if add_eos and text and not text.endswith("\n"):
            text += "\n"
        try:
            self.codes = np.frombuffer(text.encode("latin-1"), np.uint8)
        except UnicodeEncodeError:
            self.codes = np.frombuffer(text.encode("utf-32-le"), np.uint32)
        self.add_eos = add_eos
        self.eos_token = eos_token

    def __len__(self):
        return len(self.codes)

    def has_symbols(self):
        """Whether a symbol other than ``<eos>`` is there."""
        if not self.add_eos:
            return len(self.codes) > 0
        return bool(np.any(self.codes != _NEWLINE))

    def _token(self, code):
        code = int(code)
        if self.add_eos and code == _NEWLINE:
            return self.eos_token
        return chr(code)

    def _unique(self):
        """Distinct codes (sorted) and the inverse index, cheaply for bytes."""
        if self.codes.dtype == np.uint8:
            counts = np.bincount(self.codes, minlength=256)
            return np.flatnonzero(counts), None
        return np.unique(self.codes, return_inverse=True)

    def first_seen(self):
        if self.codes.dtype == np.uint8:
            uniq, _ = self._unique()  # at most 256 symbols: one pass each
            first = [int(np.argmax(self.codes == c)) for c in uniq]
        else:
            uniq, first = np.unique(self.codes, return_index=True)
        return [self._token(uniq[i]) for i in np.argsort(first)]

    def types(self):
        return {self._token(c) for c in self._unique()[0]}

    def slice(self, start, stop):
        out = object.__new__(_Chars)
        out.codes = self.codes[start:stop]
        out.add_eos = self.add_eos
        out.eos_token = self.eos_token
        return out

    def encode(self, vocab):
        uniq, inverse = self._unique()
        mapped = vocab.encode([self._token(c) for c in uniq])
        if inverse is None:
            table = np.zeros(256, np.int32)
            table[uniq] = mapped
            return table[self.codes]
        return mapped[inverse.reshape(-1)]


def read_text_file(path):
    """The text of a UTF-8 file, as every corpus file is read.

    A byte-order mark at the start of the file (``EF BB BF``, as some
    Windows editors write) is dropped: it is not part of the text, and
    kept it would glue itself to the first token. ``"\\r"`` is kept as
    data (lines are split on ``"\\n"`` only).

    Raises:
        CorpusEncodingError: the file is not UTF-8; the message names the
            file, the line and the byte offset of the first bad byte.
    """
    with open(path, "rb") as f:
        data = f.read()
    start = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return str(memoryview(data)[start:], "utf-8")  # no copy of the bytes
    except UnicodeDecodeError as e:
        offset = start + e.start
        line = data.count(b"\n", 0, offset) + 1
        raise CorpusEncodingError(
            f"{os.fspath(path)} is not UTF-8 text: line {line} (byte offset "
            f"{offset}) has byte 0x{data[offset]:02x} ({e.reason}); save the "
            "file as UTF-8"
        ) from None


def _read_split(path, level, char_format, add_eos):
    text = read_text_file(path)
    if level == "char" and char_format == "raw":
        return _Chars(text, add_eos, EOS_TOKEN)
    return _Tokens(text, add_eos, EOS_TOKEN)


def _directory_files(directory):
    paths = {}
    missing = []
    for split in SPLITS:
        names = (f"{split}.txt", f"wiki.{split}.tokens")
        for name in names:
            if (directory / name).is_file():
                paths[split] = directory / name
                break
        else:
            missing.append(f"{split!r} ({' or '.join(names)})")
    if missing:
        raise CorpusNotFoundError(
            f"Corpus directory {str(directory)!r} lacks the split file(s) "
            f"{', '.join(missing)}."
        )
    return paths


def _build_vocab(train, others, level, add_eos):
    """Vocabulary of the training split, in first-seen order.

    Word level: `<unk>` is always present (appended if the training data
    lacks it) so that unseen words can be mapped. Character level: `<unk>`
    is appended only when a valid/test symbol is missing from the training
    split, so closed alphabets keep their exact size (ptb_char: 50 = 49 +
    `<eos>`; text8: 27).
    """
    tokens = train.first_seen()
    present = set(tokens)
    if add_eos and EOS_TOKEN not in present:
        tokens.append(EOS_TOKEN)
        present.add(EOS_TOKEN)
    need_unk = level == "word" or any(
        not other.types() <= present for other in others
    )
    if need_unk and UNK_TOKEN not in present:
        tokens.append(UNK_TOKEN)
    return Vocabulary(tokens, unk_token=UNK_TOKEN, eos_token=EOS_TOKEN)


def load_corpus(
    name_or_path,
    data_dir=None,
    level=None,
    download=True,
    vocab=None,
    max_tokens=None,
    verify=True,
    max_train_tokens=None,
):
    """Loads a corpus as a `Corpus` of id arrays.

    Args:
        name_or_path: A registry name (`"ptb"`, `"ptb_char"`, `"wikitext2"`,
            `"wikitext103"`, `"text8"`), or the path of a directory holding
            `train.txt`/`valid.txt`/`test.txt` (or `wiki.{split}.tokens`) as
            plain UTF-8 text.
        data_dir: For registry names: directory searched first (see
            `resolve_corpus_files`). Ignored for directory paths.
        level: For directories: `"word"` (default) or `"char"` (every
            character of a line is a symbol, each line followed by
            `<eos>`). For registry names it must match the registry or be
            `None`.
        download: Whether missing registry files may be downloaded.
        vocab: A `Vocabulary` to reuse (e.g. the one a model was trained
            with); tokens outside it map to its unknown token. By default
            the vocabulary is built from the training split, in first-seen
            order (see `_build_vocab` for when `<unk>` is added).
        max_tokens: If set, each split is truncated to its first
            `max_tokens` ids (smoke tests). The vocabulary still comes from
            the full training split.
        verify: Whether registry files are checked against their SHA-256.
        max_train_tokens: If set, the training split alone is truncated
            to its first `max_train_tokens` ids (short training budgets);
            validation, test and the vocabulary stay whole.

    Returns:
        A `Corpus`.

    text8 is read as one stream of characters without `<eos>` and split
    into the first 90,000,000 characters (train), the next 5,000,000
    (valid) and the last 5,000,000 (test). A file of another length (e.g.
    a small test fixture) is split in the same 90% / 5% / 5% proportions.

    Raises:
        UnknownCorpusError: neither a registry name nor a directory.
        CorpusNotFoundError: a file is missing.
        ChecksumMismatchError: a registry file fails verification.
        CorpusEncodingError: a file is not UTF-8 (the message names the
            file, line and byte offset); a byte-order mark at the start
            of a file is dropped (`read_text_file`).
        EmptyCorpusError: the training split has no tokens.
        OOVError: a token cannot be mapped (a given `vocab` without an
            unknown token).
    """
    if max_tokens is not None and max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    if max_train_tokens is not None and max_train_tokens < 1:
        raise ValueError(
            f"max_train_tokens must be >= 1, got {max_train_tokens}"
        )
    spec = None
    if isinstance(name_or_path, str) and name_or_path in CORPORA:
        spec = get_corpus_spec(name_or_path)
    elif not os.path.isdir(name_or_path):
        text = os.fspath(name_or_path)
        if os.sep in text or "/" in text or os.path.exists(text):
            raise CorpusNotFoundError(
                errno.ENOENT, os.strerror(errno.ENOENT), text
            )
        try:
            spec = get_corpus_spec(text)
        except UnknownCorpusError:
            raise UnknownCorpusError(
                f"{text!r} is neither a known corpus "
                f"({', '.join(sorted(CORPORA))}) nor a directory."
            ) from None

    if spec is not None:
        if level is not None and level != spec.level:
            raise ValueError(
                f"Corpus {spec.name!r} is {spec.level}-level; got "
                f"level={level!r}."
            )
        name, level = spec.name, spec.level
        char_format, add_eos = spec.char_format, spec.add_eos
        paths = resolve_corpus_files(spec, data_dir, download, verify)
        source = "registry"
    else:
        level = level or "word"
        if level not in ("word", "char"):
            raise ValueError(f"level must be 'word' or 'char', got {level!r}")
        char_format = "raw" if level == "char" else None
        add_eos = True
        directory = pathlib.Path(name_or_path)
        name = str(directory)
        paths = _directory_files(directory)
        source = "directory"

    if spec is not None and spec.split_rule == "text8":
        whole = _read_split(paths["train"], level, char_format, add_eos)
        n = len(whole)
        if n == 100_000_000:
            bounds = (90_000_000, 95_000_000)
        else:
            bounds = (n * 90 // 100, n * 95 // 100)
        splits = {
            "train": whole.slice(0, bounds[0]),
            "valid": whole.slice(bounds[0], bounds[1]),
            "test": whole.slice(bounds[1], n),
        }
    else:
        splits = {
            s: _read_split(paths[s], level, char_format, add_eos)
            for s in SPLITS
        }

    if not splits["train"].has_symbols():
        raise EmptyCorpusError(
            f"The training split of corpus {name!r} ({paths['train']}) "
            "contains no tokens."
        )
    if vocab is None:
        others = [splits["valid"], splits["test"]]
        vocab = _build_vocab(splits["train"], others, level, add_eos)

    ids = {}
    for split, tokens in splits.items():
        try:
            ids[split] = tokens.encode(vocab)
        except OOVError as e:
            raise OOVError(f"In split {split!r} of {name!r}: {e}") from None
    full_counts = {s: len(a) for s, a in ids.items()}
    # a truncated split is a copy: a view would keep the whole split
    if max_tokens is not None:
        ids = {s: a[:max_tokens].copy() for s, a in ids.items()}
    if max_train_tokens is not None:
        ids["train"] = ids["train"][:max_train_tokens].copy()

    unk_id = vocab.unk_id
    meta = {
        "source": source,
        "level": level,
        "char_format": char_format,
        "add_eos": add_eos,
        "split_rule": spec.split_rule if spec is not None else None,
        "paths": {s: str(p) for s, p in paths.items()},
        "sha256": {s: _cached_sha256(p) for s, p in paths.items()},
        "num_tokens": {s: len(a) for s, a in ids.items()},
        "num_tokens_full": full_counts,
        "num_unk": {
            s: (0 if unk_id is None else int(np.count_nonzero(a == unk_id)))
            for s, a in ids.items()
        },
        "vocab_size": len(vocab),
        "max_tokens": max_tokens,
        "max_train_tokens": max_train_tokens,
    }
    return Corpus(
        name=name,
        level=level,
        vocab=vocab,
        train=ids["train"],
        valid=ids["valid"],
        test=ids["test"],
        meta=meta,
    )


def run_streams(data_config):
    """How a run cuts each split into streams: ``{split: (batch_size,
    bptt, batch_key, bptt_key)}``, the keys being the config keys that set
    the two numbers (``data.eval_batch_size`` falls back to
    ``data.batch_size``, ``data.eval_bptt`` to ``data.bptt``).

    Args:
        data_config: a :class:`~keras_rnnlm.config.DataConfig`.
    """
    d = data_config
    eval_batch = ("data.eval_batch_size", d.eval_batch_size)
    if d.eval_batch_size is None:
        eval_batch = ("data.batch_size", d.batch_size)
    eval_bptt = ("data.eval_bptt", d.eval_bptt)
    if d.eval_bptt is None:
        eval_bptt = ("data.bptt", d.bptt)
    test_batch = ("data.test_batch_size", d.test_batch_size)
    return {
        "train": (d.batch_size, d.bptt, "data.batch_size", "data.bptt"),
        "valid": (eval_batch[1], eval_bptt[1], eval_batch[0], eval_bptt[0]),
        "test": (test_batch[1], eval_bptt[1], test_batch[0], eval_bptt[0]),
    }


def check_corpus_fits(corpus, data_config):
    """Raises unless every split of ``corpus`` feeds the streams of a run
    with ``data_config``: each of its ``batch_size`` streams holds at
    least one whole window (``bptt`` targets, so ``bptt + 1`` tokens),
    for training at ``data.batch_size`` and ``data.bptt``, for
    validation and test at their evaluation batch sizes and window. A
    run checks this before it writes anything, so that a short
    ``valid.txt`` is not found only after a whole epoch of training.

    Raises:
        EmptyCorpusError: a split has no tokens.
        CorpusTooShortError: a split is too short; ``key`` is the config
            key of the batch size, which the message starts with.
    """
    for split, (batch, bptt, batch_key, bptt_key) in run_streams(
        data_config
    ).items():
        n = len(corpus.split(split))
        where = _split_description(corpus, split)
        if n == 0:
            raise EmptyCorpusError(f"The {where} is empty: it has no tokens.")
        need = batch * (bptt + 1)
        if n < need:
            raise CorpusTooShortError(
                f"{batch_key}={batch} is too large for the {where}: "
                f"{batch} streams of one {bptt_key}={bptt} window each "
                f"need {batch} x {bptt + 1} = {need:,} tokens, and it has "
                f"{n:,}{_truncation(corpus, split)}; lower {batch_key} (or "
                f"{bptt_key}), or give a longer split",
                key=batch_key,
            )


def _split_description(corpus, split):
    path = corpus.meta.get("paths", {}).get(split)
    return f"{split} split of {corpus.name!r}" + (f" ({path})" if path else "")


def _truncation(corpus, split):
    """`` (cut from N by data.max_tokens)`` where a limit cut the split."""
    meta = corpus.meta
    full = meta.get("num_tokens_full", {}).get(split)
    if full is None or full <= len(corpus.split(split)):
        return ""
    limit = "data.max_tokens"
    train_limit = meta.get("max_train_tokens")
    if split == "train" and train_limit is not None:
        if meta.get("max_tokens") is None or train_limit < meta["max_tokens"]:
            limit = "data.max_train_tokens"
    return f" (cut from {full:,} by {limit})"
