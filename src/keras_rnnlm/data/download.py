"""Finding, downloading and verifying corpus files.

`resolve_corpus_files` looks for the files of a registered corpus in this
order and uses the first place that holds all of them:

1. the `data_dir` argument,
2. the directory named by the environment variable `KERAS_RNNLM_DATA`,
3. the Keras cache, `$KERAS_HOME/datasets/keras_rnnlm/<subdir>` (by default
   `~/.keras/datasets/keras_rnnlm/<subdir>`).

For 1 and 2 the directory may be either a data root that contains the corpus
directory (e.g. `/data`, holding `/data/ptb/train.txt`) or the corpus
directory itself (`/data/ptb`). Files found in none of these places are
downloaded with `keras.utils.get_file` into the Keras cache; when a URL is an
archive, only the needed member is copied out under the expected file name.

Every file is then verified: a known SHA-256 must match exactly, a known size
must match, and a file must never be empty or a Git LFS pointer. A failing
file raises `ChecksumMismatchError`; it is never used silently. Digests are
cached per `(path, size, mtime)` within the process, so loading a corpus a
second time does not hash it again.
"""

import hashlib
import os
import pathlib
import shutil
import tarfile
import threading
import urllib.parse
import zipfile

import keras

from keras_rnnlm.data.errors import ChecksumMismatchError
from keras_rnnlm.data.errors import CorpusNotFoundError
from keras_rnnlm.data.registry import CorpusSpec
from keras_rnnlm.data.registry import get_corpus_spec

ENV_VAR = "KERAS_RNNLM_DATA"
"""Environment variable naming a directory that holds the corpora."""

_CACHE_SUBDIR = os.path.join("datasets", "keras_rnnlm")
_ARCHIVE_SUFFIXES = (".zip", ".tgz", ".tar.gz", ".tar")
_LFS_PREFIX = b"version https://git-lfs"

_digest_cache: dict[tuple[str, int, int], str] = {}
_digest_lock = threading.Lock()


def sha256_file(path):
    """Returns the SHA-256 hex digest of the file at `path`."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _cached_sha256(path):
    """`sha256_file`, memoised on (resolved path, size, mtime_ns)."""
    path = pathlib.Path(path).resolve()
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    with _digest_lock:
        digest = _digest_cache.get(key)
    if digest is None:
        digest = sha256_file(path)
        with _digest_lock:
            _digest_cache[key] = digest
    return digest


def keras_cache_dir(spec):
    """Returns the Keras cache directory of a corpus (not created).

    `KERAS_HOME` is read at call time, so tests and users can redirect the
    cache after Keras was imported.
    """
    home = os.environ.get("KERAS_HOME")
    if not home:
        base = os.path.expanduser("~")
        if not os.access(base, os.W_OK):
            base = "/tmp"
        home = os.path.join(base, ".keras")
    return pathlib.Path(home) / _CACHE_SUBDIR / spec.subdir


def verify_file(path, remote, corpus=""):
    """Checks a local file against its `RemoteFile` description.

    Args:
        path: The local file.
        remote: Its `RemoteFile`; `sha256` and `size` are checked when known.
        corpus: Corpus name, used in error messages.

    Raises:
        ChecksumMismatchError: if the file is empty, a Git LFS pointer, of
            the wrong size or has the wrong SHA-256.
    """
    path = pathlib.Path(path)
    size = path.stat().st_size
    what = (
        f"File {str(path)!r} of corpus {corpus!r}"
        if corpus
        else (f"File {str(path)!r}")
    )
    hint = (
        "The file may be truncated or corrupt (for example an interrupted "
        "download, a Git LFS pointer or an HTML error page). Delete it and "
        "download it again."
    )
    if size == 0:
        raise ChecksumMismatchError(f"{what} is empty. {hint}")
    with open(path, "rb") as f:
        if f.read(len(_LFS_PREFIX)) == _LFS_PREFIX:
            raise ChecksumMismatchError(
                f"{what} is a Git LFS pointer, not the data. {hint}"
            )
    if remote.size is not None and size != remote.size:
        raise ChecksumMismatchError(
            f"{what} has {size} bytes, expected {remote.size}. {hint}"
        )
    if remote.sha256 is not None:
        actual = _cached_sha256(path)
        if actual != remote.sha256.lower():
            raise ChecksumMismatchError(
                f"{what} has the wrong SHA-256.\n"
                f"  expected: {remote.sha256}\n"
                f"  actual:   {actual}\n"
                f"{hint}"
            )


def _candidate_dirs(spec, data_dir):
    """Directories to search, in order, as (directory, description) pairs."""
    candidates = []
    roots = []
    if data_dir is not None:
        roots.append((data_dir, "--data-dir"))
    env = os.environ.get(ENV_VAR)
    if env:
        roots.append((env, f"${ENV_VAR}"))
    for root, label in roots:
        root = pathlib.Path(root).expanduser()
        candidates.append((root / spec.subdir, label))
        candidates.append((root, label))
    candidates.append((keras_cache_dir(spec), "Keras cache"))
    seen = set()
    unique = []
    for directory, label in candidates:
        key = os.path.abspath(directory)
        if key not in seen:
            seen.add(key)
            unique.append((directory, label))
    return unique


def _is_archive(url):
    path = urllib.parse.urlsplit(url).path.lower()
    return path.endswith(_ARCHIVE_SUFFIXES)


def _normalize_member(name):
    while name.startswith("./"):
        name = name[2:]
    return name.lstrip("/")


def _pick_member(names, wanted):
    """Chooses the archive member for `wanted` (exact, then by base name)."""
    wanted = _normalize_member(wanted)
    normalized = {_normalize_member(n): n for n in names}
    if wanted in normalized:
        return normalized[wanted]
    base = wanted.rsplit("/", 1)[-1]
    for norm, original in normalized.items():
        if norm.rsplit("/", 1)[-1] == base:
            return original
    raise KeyError(f"archive has no member {wanted!r}")


def _extract_member(archive, member, dest):
    """Copies one archive member's bytes to `dest` (no path from archive)."""
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            name = _pick_member(
                [i.filename for i in zf.infolist() if not i.is_dir()], member
            )
            with zf.open(name) as src, open(dest, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
        return
    if tarfile.is_tarfile(archive):
        with tarfile.open(archive, "r:*") as tf:
            files = {m.name: m for m in tf.getmembers() if m.isfile()}
            name = _pick_member(list(files), member)
            src = tf.extractfile(files[name])
            with src, open(dest, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
        return
    raise ValueError(f"{archive} is not a zip or tar archive")


def _remove(path):
    if path.exists():
        path.unlink()


def _fetch(url, remote, part):
    """Downloads `url` (or its archive member) to the path `part`."""
    if _is_archive(url):
        fname = os.path.basename(urllib.parse.urlsplit(url).path)
        # Archives are shared between corpora (simple-examples.tgz holds
        # ptb and ptb_char), so they live next to the corpus directories.
        archive = keras.utils.get_file(
            fname=fname,
            origin=url,
            cache_dir=str(part.parent.parent),
            cache_subdir="_archives",
        )
        try:
            _extract_member(archive, remote.archive_member, part)
        except Exception:
            # A bad archive (e.g. an HTML error page) must not stay in the
            # cache and shadow the next attempt.
            os.remove(archive)
            raise
    else:
        downloaded = keras.utils.get_file(
            fname=part.name,
            origin=url,
            cache_dir=str(part.parent),
            cache_subdir=".",
        )
        if pathlib.Path(downloaded).resolve() != part.resolve():
            shutil.move(downloaded, part)


def _download(spec, remote, dest_dir):
    """Downloads `remote` into `dest_dir`, trying each URL in turn.

    Returns:
        `(path, errors)`: the verified file (or `None`) and, per failed URL,
        a `(url, message)` pair. A downloaded file that fails verification
        raises `ChecksumMismatchError` if no other URL succeeds.
    """
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / remote.name
    part = dest_dir / (remote.name + ".part")
    errors = []
    mismatch = None
    for url in remote.urls:
        _remove(part)
        try:
            _fetch(url, remote, part)
            verify_file(part, remote, spec.name)
        except ChecksumMismatchError as e:
            mismatch = ChecksumMismatchError(f"Downloaded from {url}: {e}")
            errors.append((url, str(e).splitlines()[0]))
            _remove(part)
            continue
        except Exception as e:  # noqa: BLE001 - get_file raises `Exception`.
            errors.append((url, f"{type(e).__name__}: {e}"))
            _remove(part)
            continue
        os.replace(part, dest)
        return dest, errors
    if mismatch is not None:
        raise mismatch
    return None, errors


def _not_found_message(spec, missing, searched, download, failures):
    """The one-line error of a corpus found nowhere: the files, the
    places searched, why downloading did not get them, and the fix."""
    names = ", ".join(m.name for m in missing)
    places = {}
    for directory, label in searched:
        places.setdefault(label, []).append(str(directory))
    where = "; ".join(
        f"{' or '.join(dirs)} ({label})" for label, dirs in places.items()
    )
    if ENV_VAR not in os.environ:
        where += f"; ${ENV_VAR} is not set"
    if not download:
        fetched = "downloading is off (download=False)"
    elif failures:
        fetched = f"downloading failed ({next(iter(failures.values()))})"
    else:
        fetched = "it has no download URL"
    urls = " ".join(
        dict.fromkeys(url for remote in missing for url in remote.urls)
    )
    fix = (
        f"give --data-dir DIR (data.data_dir) or set ${ENV_VAR} to a folder "
        f"holding {spec.subdir}/{missing[0].name}"
    )
    if urls:
        fix += f", or download the file(s) there from {urls}"
    return (
        f"Corpus {spec.name!r} not found: no {names} in {where}; "
        f"{fetched}. Fix: {fix}"
    )


def _partial_corpus_message(spec, remotes, searched):
    """The error for a searched directory that holds some of the corpus's
    files but not all (a file deleted or not yet copied): it names exactly
    the files missing there (``None`` if no directory is partial)."""
    for directory, label in searched:
        present = [n for n in remotes if (directory / n).is_file()]
        if present:
            missing = [n for n in remotes if n not in present]
            return (
                f"Corpus {spec.name!r} is incomplete in {directory} "
                f"({label}): missing "
                + ", ".join(repr(str(directory / n)) for n in missing)
                + " (found "
                + ", ".join(repr(n) for n in present)
                + ")."
            )
    return None


def resolve_corpus_files(name, data_dir=None, download=True, verify=True):
    """Finds (and if needed downloads) the files of a registered corpus.

    Args:
        name: Registry name (see `CORPORA`) or a `CorpusSpec`.
        data_dir: Optional directory searched first: a data root containing
            the corpus directory, or the corpus directory itself.
        download: If `False`, the network is never used.
        verify: If `True` (default), check each file's size and SHA-256 when
            the registry knows them (and that it is not empty).

    Returns:
        A dict mapping `"train"`, `"valid"` and `"test"` to absolute
        `pathlib.Path`s. For corpora with one file (text8) all three are the
        same path.

    Raises:
        UnknownCorpusError: unknown name.
        CorpusNotFoundError: a file is in none of the searched places and
            could not be downloaded. One error names every missing file,
            every place searched, the URLs and `KERAS_RNNLM_DATA`.
        ChecksumMismatchError: a file failed verification.
    """
    spec = name if isinstance(name, CorpusSpec) else get_corpus_spec(name)
    remotes = {}
    for remote in spec.files.values():
        remotes.setdefault(remote.name, remote)
    searched = _candidate_dirs(spec, data_dir)

    found_dir = None
    for directory, _ in searched:
        if all((directory / n).is_file() for n in remotes):
            found_dir = directory
            break

    if found_dir is None:
        cache_dir = searched[-1][0]
        missing = [
            r for n, r in remotes.items() if not (cache_dir / n).is_file()
        ]
        failures = {}
        still_missing = []
        for remote in missing:
            path = None
            # after a file that no URL gave (offline), no more attempts
            if download and remote.urls and not still_missing:
                path, errors = _download(spec, remote, cache_dir)
                for url, message in errors:
                    failures[(remote.name, url)] = message
            if path is None:
                still_missing.append(remote)
        if still_missing:
            raise CorpusNotFoundError(
                _partial_corpus_message(spec, remotes, searched)
                or _not_found_message(
                    spec, still_missing, searched, download, failures
                )
            )
        found_dir = cache_dir

    paths = {n: (found_dir / n).resolve() for n in remotes}
    if verify:
        for n, remote in remotes.items():
            verify_file(paths[n], remote, spec.name)
    return {split: paths[r.name] for split, r in spec.files.items()}
