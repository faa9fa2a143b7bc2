"""Versions of one model: load, warm up, serve by policy and label, swap.

The base directory holds numeric version subdirectories (TF Serving's
layout, ``MODEL_BASE_DIR/1``, ``MODEL_BASE_DIR/2``...). Which versions are
served follows TF Serving's ``model_version_policy`` (:class:`VersionPolicy`:
the latest N, all, or specific versions found on disk); a request without
a version gets the highest one available, one with a ``version_label``
the version the model config maps it to. A poller looks at the directory:
a newly aspired version is loaded and warmed up on the side and then
swapped in, and a version no longer aspired (a newer one arrived, or its
directory was removed) is unloaded once an aspired one is available (TF
Serving's availability-preserving policy), so removing the newest
directory rolls back to the one below it. A request holds the
:class:`Servable` it started with, so in-flight requests finish on the old
version. A version that fails to load is reported in the status (state
``END`` with its error) and the served ones stay.
"""

import json
import os
import threading
import time

import tensorflow as tf

from keras_rnnlm.export.saved_model import MAX_BATCH_SIZE
from keras_rnnlm.export.saved_model import MAX_TOKENS
from keras_rnnlm.export.saved_model import METADATA_ASSET
from keras_rnnlm.scoring.scorer import TIME_BUCKETS
from keras_rnnlm.serving.engine import Budget
from keras_rnnlm.serving.errors import ServingError
from keras_rnnlm.serving.limits import WARMUP_SECONDS
from keras_rnnlm.serving.limits import Limits
from keras_rnnlm.serving.warmup import replay_warmup_file
from keras_rnnlm.serving.warmup import warm_up_buckets

# TF Serving's ModelVersionStatus.State names.
START, LOADING, AVAILABLE, UNLOADING, END = (
    "START",
    "LOADING",
    "AVAILABLE",
    "UNLOADING",
    "END",
)


def version_dirs(base_dir, incomplete=None):
    """``{version: path}`` of the numeric subdirectories of ``base_dir``
    that hold a ``saved_model.pb``; the numbers of those that do not are
    added to the set ``incomplete`` when given."""
    out = {}
    for name in os.listdir(base_dir):
        path = os.path.join(base_dir, name)
        if name.isdigit() and os.path.isdir(path):
            if os.path.exists(os.path.join(path, "saved_model.pb")):
                out[int(name)] = path
            elif incomplete is not None:
                incomplete.add(int(name))
    return out


class VersionPolicy:
    """TF Serving's ``ServableVersionPolicy``: which versions on disk are
    served (``latest`` N highest, ``all``, or ``specific`` versions).

    Args:
        kind: ``"latest"``, ``"all"`` or ``"specific"``.
        num_versions: ``latest``'s N (>= 1).
        versions: ``specific``'s version numbers.
    """

    def __init__(self, kind="latest", num_versions=1, versions=()):
        if kind not in ("latest", "all", "specific"):
            raise ValueError(f"unknown version policy {kind!r}")
        if kind == "latest" and int(num_versions) < 1:
            raise ValueError("latest: num_versions must be >= 1")
        if kind == "specific" and not versions:
            raise ValueError("specific: at least one version is needed")
        self.kind = kind
        self.num_versions = int(num_versions)
        self.versions = frozenset(int(v) for v in versions)

    @classmethod
    def from_proto(cls, policy):
        """From a ``FileSystemStoragePathSourceConfig.ServableVersionPolicy``
        (``model_version_policy`` of a ``ModelConfig``); unset: latest 1."""
        which = policy.WhichOneof("policy_choice")
        if which == "all":
            return cls("all")
        if which == "specific":
            return cls("specific", versions=policy.specific.versions)
        if which == "latest":
            return cls("latest", policy.latest.num_versions or 1)
        return cls()

    def aspired(self, found):
        """The versions to serve among ``found`` (version numbers)."""
        found = sorted(found)
        if self.kind == "latest":
            return set(found[-self.num_versions :])
        if self.kind == "all":
            return set(found)
        return set(found) & self.versions

    def __repr__(self):
        if self.kind == "latest":
            return f"latest {{ num_versions: {self.num_versions} }}"
        if self.kind == "all":
            return "all {}"
        return f"specific {{ versions: {sorted(self.versions)} }}"


class Signature:
    """One signature of a loaded SavedModel: its function and its inputs'
    and outputs' dtypes and shapes (from the SavedModel's SignatureDef)."""

    def __init__(self, name, fn, signature_def):
        self.name = name
        self.fn = fn
        self.signature_def = signature_def
        self.inputs = {}
        for key, info in signature_def.inputs.items():
            shape = None
            if not info.tensor_shape.unknown_rank:
                shape = [d.size for d in info.tensor_shape.dim]
            self.inputs[key] = (tf.dtypes.as_dtype(info.dtype), shape)
        self.outputs = sorted(signature_def.outputs)
        self.budget = None  # the export's per-call Budget (Servable sets)
        # Batched: every input has a leading batch dimension. generate's
        # parameters are scalars (unknown rank): never merged, never
        # split (a row's noise depends on its index in the call).
        self.batched = bool(self.inputs) and all(
            shape is not None and len(shape) >= 1 and shape[0] == -1
            for _, shape in self.inputs.values()
        )


class Servable:
    """A loaded version: its signatures, metadata and limits."""

    def __init__(self, version, path):
        import tensorflow_text  # noqa: F401  (registers the tokenizer ops)
        from tensorflow.core.protobuf import saved_model_pb2

        self.version = int(version)
        self.path = path
        sm = saved_model_pb2.SavedModel()
        with open(os.path.join(path, "saved_model.pb"), "rb") as f:
            sm.ParseFromString(f.read())
        meta_graph = next(
            (g for g in sm.meta_graphs if "serve" in g.meta_info_def.tags),
            None,
        )
        if meta_graph is None:
            raise ValueError(f"{path}: no MetaGraph tagged 'serve'")
        self.signature_defs = {
            k: v
            for k, v in meta_graph.signature_def.items()
            if not k.startswith("__")
        }
        self.model = tf.saved_model.load(path)
        self.signatures = {
            name: Signature(name, self.model.signatures[name], sig_def)
            for name, sig_def in self.signature_defs.items()
        }
        self.metadata = {}
        meta = os.path.join(path, "assets", METADATA_ASSET)
        if os.path.exists(meta):
            with open(meta) as f:
                self.metadata = json.load(f)
        limits = self.metadata.get("limits", {})
        for sig in self.signatures.values():
            if not sig.batched:
                continue  # initial_state: no time dimension
            # step pads nothing: its padded length is its T.
            bucketed = not (
                "token_ids" in sig.inputs and "lengths" not in sig.inputs
            )
            sig.budget = Budget(
                limits.get("max_batch_size", MAX_BATCH_SIZE),
                limits.get("max_tokens", MAX_TOKENS),
                self.metadata.get("time_buckets") or TIME_BUCKETS,
                bucketed,
            )

    @property
    def tokenization(self):
        return self.metadata.get("tokenization", {}).get("mode", "whitespace")

    def warm_up(self, max_steps, seconds=WARMUP_SECONDS):
        """Replays the version's TF Serving warm-up file (if any), then
        warms up its time buckets (see :mod:`keras_rnnlm.serving.warmup`).
        Returns ``(records replayed or None, WarmupReport)``; a file that
        cannot be replayed raises :class:`WarmupError`."""
        records = replay_warmup_file(self)
        return records, warm_up_buckets(self, max_steps, seconds)


class ModelManager:
    """The versions of one model: status, the served versions, a poller.

    Args:
        name: the model name of the API.
        base_dir: directory of numeric version subdirectories.
        poll_seconds: how often to look at the directory (0: never).
        warm_up: before serving a version, replay its
            ``assets.extra/tf_serving_warmup_requests`` (if any) and call
            the scoring signatures once per time bucket that a request
            within ``limits`` can reach.
        on_event: ``f(message)`` for load/swap/failure/warm-up reports.
        limits: the server's :class:`Limits` (its longest sentence bounds
            the buckets warmed up).
        warmup_seconds: time budget of the bucket warm-up of one version
            (shortest buckets first; the rest compile on first use).
        policy: a :class:`VersionPolicy` (default: the latest version).
        labels: ``{label: version}`` (a model config's
            ``version_labels``); each must name an available version when
            :meth:`check_labels` runs (at start-up, as TF Serving checks a
            config).
    """

    def __init__(
        self,
        name,
        base_dir,
        poll_seconds=1.0,
        warm_up=True,
        on_event=None,
        limits=None,
        warmup_seconds=WARMUP_SECONDS,
        policy=None,
        labels=None,
    ):
        self.name = name
        self.base_dir = os.fspath(base_dir)
        self.poll_seconds = float(poll_seconds)
        self.warm_up = bool(warm_up)
        self.on_event = on_event or (lambda message: None)
        self.limits = limits or Limits()
        self.warmup_seconds = float(warmup_seconds)
        self.policy = policy or VersionPolicy()
        self.labels = {str(k): int(v) for k, v in (labels or {}).items()}
        self.warmups = {}  # version -> (records replayed, WarmupReport)
        self._lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._served = {}  # version -> Servable, AVAILABLE
        self._status = {}  # version -> (state, error_code, message)
        self._tried = {}  # version -> mtime of a failed attempt
        self._incomplete = set()  # reported: no saved_model.pb (yet)
        self._stop = threading.Event()
        self._thread = None

    # ---------------------------------------------------------- loading
    def load_latest(self):
        """Brings the served versions in line with the directory and the
        policy: loads the aspired versions not yet served, unloads the
        others once an aspired one is available. Returns whether a
        version was loaded."""
        if not os.path.isdir(self.base_dir):
            raise FileNotFoundError(
                f"No model base directory at {self.base_dir!r}"
            )
        with self._sync_lock:
            return self._sync()

    def _sync(self):
        incomplete = set()
        found = version_dirs(self.base_dir, incomplete)
        for version in sorted(incomplete - self._incomplete):
            self.on_event(
                f"model {self.name!r}: version directory {version} has no "
                "saved_model.pb; not loaded (a version is loaded once its "
                "saved_model.pb is in place)"
            )
        self._incomplete = incomplete
        aspired = self.policy.aspired(found)
        loaded = False
        for version in sorted(aspired, reverse=True):
            if version in self._served:
                continue
            path = found[version]
            stamp = _mtime(path)
            if self._tried.get(version) == stamp:
                continue  # failed before and unchanged
            loaded |= self._load(version, path, stamp)
        if self.policy.kind == "latest" and not self._served:
            # Nothing serves (the newest failed to load): the highest
            # version below it that loads serves until one aspired does.
            for version in sorted(set(found) - aspired, reverse=True):
                stamp = _mtime(found[version])
                if self._tried.get(version) != stamp and self._load(
                    version, found[version], stamp
                ):
                    loaded = True
                    break
        self._unload_unaspired(aspired)
        return loaded

    def _unload_unaspired(self, aspired):
        with self._lock:
            served = dict(self._served)
        stale = sorted(v for v in served if v not in aspired)
        if not stale:
            return
        # Availability-preserving: a version leaves only once an aspired
        # one serves (or nothing is aspired any more); of several stale
        # ones, the newest stays until then.
        if aspired and not any(v in served for v in aspired):
            stale = stale[:-1]
        for version in stale:
            with self._lock:
                self._served.pop(version, None)
            self._set(version, END)
            self.warmups.pop(version, None)
            latest = self.latest_version()
            self.on_event(
                f"model {self.name!r} version {version} unloaded (not "
                f"aspired by the policy {self.policy!r} or its directory "
                f"is gone); latest served version: {latest}"
            )

    def _load(self, version, path, stamp):
        self._set(version, LOADING)
        t0 = time.perf_counter()
        try:
            servable = Servable(version, path)
            if self.warm_up:
                # Steps of the longest sentence: its tokens and <eos>.
                records, report = servable.warm_up(
                    self.limits.max_sentence_tokens + 1,
                    self.warmup_seconds,
                )
                self.warmups[version] = (records, report)
                replayed = (
                    "no warm-up file"
                    if records is None
                    else f"{records} warm-up file records replayed"
                )
                self.on_event(
                    f"model {self.name!r} version {version} warm-up: "
                    f"{replayed}; {report.summary()}"
                )
        except Exception as e:  # noqa: BLE001  (any failure: keep serving)
            self._tried[version] = stamp
            message = f"{type(e).__name__}: {e}".splitlines()[0]
            self._set(version, END, "UNKNOWN", message)
            self.on_event(
                f"model {self.name!r} version {version} failed to load "
                f"({message}); latest served version: "
                f"{self.latest_version()}"
            )
            return False
        self._tried.pop(version, None)
        with self._lock:
            self._served[version] = servable
        self._set(version, AVAILABLE)
        self.on_event(
            f"model {self.name!r} version {version} loaded and available "
            f"({time.perf_counter() - t0:.1f} s)"
        )
        return True

    def _set(self, version, state, code="OK", message=""):
        with self._lock:
            self._status[version] = (state, code, message)

    def check_labels(self):
        """Raises :class:`ServingError` FAILED_PRECONDITION (TF Serving's
        answer to such a config) if a label names a version that is not
        available."""
        with self._lock:
            served = set(self._served)
        for version in sorted(set(self.labels.values())):
            if version not in served:
                raise ServingError(
                    "FAILED_PRECONDITION",
                    f"Request to assign label to version {version} of model "
                    f"{self.name}, which is not currently available for "
                    "inference",
                )

    # ----------------------------------------------------------- poller
    def start_polling(self):
        if self.poll_seconds <= 0 or self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self._poll, name="keras-rnnlm-version-poller", daemon=True
        )
        self._thread.start()

    def _poll(self):
        while not self._stop.wait(self.poll_seconds):
            try:
                self.load_latest()
            except Exception as e:  # noqa: BLE001  (report, keep polling)
                self.on_event(f"version poll failed: {e}")

    def stop(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    # ------------------------------------------------------------ query
    def latest_version(self):
        """The highest available version, or None."""
        with self._lock:
            return max(self._served, default=None)

    def resolve(self, version=None, label=None):
        """The version a request names: its number, its label's (an
        unknown label: INVALID_ARGUMENT, as TF Serving), or None for the
        latest."""
        if version is not None and label is not None:
            raise ServingError(
                "INVALID_ARGUMENT",
                f"Both model version ({version}) and model version label "
                f"({label}) cannot be supplied.",
            )
        if label is not None:
            if label not in self.labels:
                raise ServingError(
                    "INVALID_ARGUMENT",
                    f"Unrecognized servable version label: {label}",
                )
            return self.labels[label]
        return None if version is None else int(version)

    def servable(self, version=None, label=None):
        """The :class:`Servable` of ``version`` (or of ``label``; neither:
        the highest available version)."""
        version = self.resolve(version, label)
        with self._lock:
            if version is None:
                if self._served:
                    return self._served[max(self._served)]
                raise ServingError(
                    "NOT_FOUND",
                    f"Servable not found for request: Latest({self.name})",
                )
            servable = self._served.get(version)
        if servable is None:
            raise ServingError(
                "NOT_FOUND",
                f"Servable not found for request: Specific({self.name}, "
                f"{version})",
            )
        return servable

    def status(self, version=None, label=None):
        """``[(version, state, error_code, message)]``, newest first (of
        every version seen, or of the one ``version`` / ``label`` names)."""
        version = self.resolve(version, label)
        with self._lock:
            items = sorted(self._status.items(), reverse=True)
        if version is not None:
            items = [(v, s) for v, s in items if v == version]
            if not items:
                raise ServingError(
                    "NOT_FOUND",
                    f"Could not find version {version} of model {self.name}",
                )
        if not items:
            raise ServingError(
                "NOT_FOUND",
                f"Could not find any versions of model {self.name}",
            )
        return [(v, *s) for v, s in items]


def _mtime(path):
    stamps = [os.path.getmtime(path)]
    for root, _, files in os.walk(path):
        stamps += [os.path.getmtime(os.path.join(root, f)) for f in files]
    return max(stamps)
