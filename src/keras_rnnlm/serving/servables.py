"""Versions of one model: load, warm up, serve the highest, hot-swap.

The base directory holds numeric version subdirectories (TF Serving's
layout, ``MODEL_BASE_DIR/1``, ``MODEL_BASE_DIR/2``...). The highest
loadable version is served. A poller looks for a new one; it is loaded and
warmed up on the side and then swapped in: a request holds the
:class:`Servable` it started with, so in-flight requests finish on the old
version. A version that fails to load is reported in the status (state
``END`` with its error) and the served one stays.
"""

import json
import os
import threading
import time

import tensorflow as tf

from keras_rnnlm.export.saved_model import METADATA_ASSET
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


def version_dirs(base_dir):
    """``{version: path}`` of the numeric subdirectories of ``base_dir``
    that hold a ``saved_model.pb``."""
    out = {}
    for name in os.listdir(base_dir):
        path = os.path.join(base_dir, name)
        if name.isdigit() and os.path.isdir(path):
            if os.path.exists(os.path.join(path, "saved_model.pb")):
                out[int(name)] = path
    return out


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
        # Batched: every input has a leading batch dimension.
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
    """The versions of one model: status, the served version, a poller.

    Args:
        name: the model name of the API.
        base_dir: directory of numeric version subdirectories.
        poll_seconds: how often to look for a new version (0: never).
        warm_up: before serving a version, replay its
            ``assets.extra/tf_serving_warmup_requests`` (if any) and call
            the scoring signatures once per time bucket that a request
            within ``limits`` can reach.
        on_event: ``f(message)`` for load/swap/failure/warm-up reports.
        limits: the server's :class:`Limits` (its longest sentence bounds
            the buckets warmed up).
        warmup_seconds: time budget of the bucket warm-up of one version
            (shortest buckets first; the rest compile on first use).
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
    ):
        self.name = name
        self.base_dir = os.fspath(base_dir)
        self.poll_seconds = float(poll_seconds)
        self.warm_up = bool(warm_up)
        self.on_event = on_event or (lambda message: None)
        self.limits = limits or Limits()
        self.warmup_seconds = float(warmup_seconds)
        self.warmups = {}  # version -> (records replayed, WarmupReport)
        self._lock = threading.Lock()
        self._current = None
        self._loaded = {}  # version -> Servable still reachable
        self._status = {}  # version -> (state, error_code, message)
        self._tried = {}  # version -> mtime of a failed attempt
        self._stop = threading.Event()
        self._thread = None

    # ---------------------------------------------------------- loading
    def load_latest(self):
        """Loads the highest version newer than the served one, if any;
        returns whether a new version was swapped in."""
        if not os.path.isdir(self.base_dir):
            raise FileNotFoundError(
                f"No model base directory at {self.base_dir!r}"
            )
        current = self._current.version if self._current else -1
        for version, path in sorted(version_dirs(self.base_dir).items())[::-1]:
            if version <= current:
                return False
            stamp = _mtime(path)
            if self._tried.get(version) == stamp:
                continue  # failed before and unchanged: keep the old one
            if self._load(version, path, stamp):
                return True
        return False

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
                f"({message}); serving version "
                f"{self._current.version if self._current else 'none'}"
            )
            return False
        with self._lock:
            old, self._current = self._current, servable
        self._set(version, AVAILABLE)
        if old is not None:
            self._set(old.version, END)
        self.on_event(
            f"model {self.name!r} version {version} loaded and available "
            f"({time.perf_counter() - t0:.1f} s)"
        )
        return True

    def _set(self, version, state, code="OK", message=""):
        with self._lock:
            self._status[version] = (state, code, message)

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
    def servable(self, version=None):
        """The served :class:`Servable` (or the loaded ``version``)."""

        current = self._current
        if current is None:
            raise ServingError(
                "UNAVAILABLE", f"model {self.name!r} has no loaded version"
            )
        if version is None or int(version) == current.version:
            return current
        raise ServingError(
            "NOT_FOUND",
            f"Servable not found for request: Specific({self.name}, {version})",
        )

    def status(self, version=None):
        """``[(version, state, error_code, message)]``, newest first."""
        with self._lock:
            items = sorted(self._status.items(), reverse=True)
        if version is not None:
            items = [(v, s) for v, s in items if v == int(version)]
            if not items:
                raise ServingError(
                    "NOT_FOUND",
                    f"Could not find version {version} of model {self.name}",
                )
        return [(v, *s) for v, s in items]


def _mtime(path):
    stamps = [os.path.getmtime(path)]
    for root, _, files in os.walk(path):
        stamps += [os.path.getmtime(os.path.join(root, f)) for f in files]
    return max(stamps)
