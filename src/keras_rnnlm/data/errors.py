"""Exception hierarchy of `keras_rnnlm.data`.

Every error raised on purpose by the data package derives from `DataError`,
and also from the built-in exception that callers would naturally expect
(`FileNotFoundError`, `ValueError`, `KeyError`), so that both
`except DataError` and `except FileNotFoundError` work.
"""


class DataError(Exception):
    """Base class of every error raised by `keras_rnnlm.data`."""


class CorpusNotFoundError(DataError, FileNotFoundError):
    """A corpus file is neither on disk nor downloadable.

    The message names the missing file, every place that was searched, the
    download URL(s) and the environment variable that points at a data
    directory.
    """


class ChecksumMismatchError(DataError, ValueError):
    """A corpus file does not have the expected SHA-256 (or size).

    The file is probably truncated or corrupt; it is never used silently.
    """


class UnknownCorpusError(DataError, KeyError):
    """A corpus name is not in the registry."""

    def __str__(self):
        # `KeyError.__str__` would repr() the message and add quotes.
        return str(self.args[0]) if self.args else ""


class EmptyCorpusError(DataError, ValueError):
    """A corpus split (usually the training split) contains no tokens."""


class OOVError(DataError, KeyError):
    """A token is not in the vocabulary and cannot be mapped to `<unk>`."""

    def __str__(self):
        return str(self.args[0]) if self.args else ""


class VocabularyFormatError(DataError, ValueError):
    """A serialised vocabulary is malformed or has an unknown format."""


class CorpusEncodingError(DataError, ValueError):
    """A corpus file is not UTF-8 text; the message names the file, the
    line and the byte offset of the first undecodable byte."""


class CorpusTooShortError(DataError, ValueError):
    """A corpus split is too short for the streams a run cuts it into.

    ``key`` is the config key that decides it (``"data.batch_size"``,
    ...), so that a command line can name the option that set it.
    """

    def __init__(self, message, key=None):
        super().__init__(message)
        self.key = key
