"""The server: one model's versions, an engine, REST and gRPC front ends.

:class:`Server` starts both front ends on their ports (``port=0``: a free
one) and stops them, letting in-flight requests finish (SIGTERM in
:func:`serve_forever`). Access lines (one per request, both APIs) go to
the ``keras_rnnlm.serving.access`` logger.
"""

import asyncio
import logging
import signal
import socket
import threading
import time

import uvicorn

from keras_rnnlm.serving.connections import bounded_protocol
from keras_rnnlm.serving.engine import Engine
from keras_rnnlm.serving.errors import ServingError
from keras_rnnlm.serving.grpc_service import start_grpc_server
from keras_rnnlm.serving.limits import WARMUP_SECONDS
from keras_rnnlm.serving.limits import Limits
from keras_rnnlm.serving.rest import build_app
from keras_rnnlm.serving.servables import ModelManager

access_log = logging.getLogger("keras_rnnlm.serving.access")
events = logging.getLogger("keras_rnnlm.serving")


class Service:
    """What both APIs share: the model versions, the engine, the limits."""

    def __init__(self, models, engine, limits):
        self.models = models
        self.engine = engine
        self.limits = limits

    def signature(self, servable, name):
        sig = servable.signatures.get(name)
        if sig is None:
            # TF Serving's answer (servables/tensorflow/predict_util.cc).
            raise ServingError(
                "FAILED_PRECONDITION",
                f'Serving signature key "{name}" not found.',
            )
        return sig

    def log_access(self, api, method, target, code, seconds, status=None):
        """One access line: API, method, path (REST) or signature (gRPC),
        model, status (and the HTTP code over REST) and latency."""
        access_log.info(
            "%s %s %s model=%s status=%s%s %.1fms",
            api,
            method,
            target if api == "rest" else f"signature={target}",
            self.models.name,
            code,
            "" if status is None else f" http={status}",
            seconds * 1000,
        )


class Server:
    """REST (uvicorn + starlette) and gRPC (grpcio) on one :class:`Service`.

    Args:
        model_name: the model name in the API paths / ``ModelSpec``.
        base_dir: directory of numeric version subdirectories.
        host: interface to bind (default loopback only).
        rest_port, grpc_port: ports (0: a free port; None: that API off).
        batching: merge concurrent requests (see :class:`Engine`).
        max_batch_size, batch_timeout_s, max_enqueued, num_threads: the
            batching options.
        limits: :class:`~keras_rnnlm.serving.limits.Limits`.
        poll_seconds: how often to look for a new version (0: never).
        warm_up: warm each loaded version up before serving it (its
            ``assets.extra`` warm-up file, then every time bucket; see
            :mod:`keras_rnnlm.serving.warmup`).
        warmup_seconds: time budget of one version's bucket warm-up.
        drain_seconds: how long a stop waits for in-flight requests.
        policy: the :class:`~keras_rnnlm.serving.servables.VersionPolicy`
            (default: the latest version).
        labels: ``{label: version}``, each an available version at start.
    """

    def __init__(
        self,
        model_name,
        base_dir,
        host="127.0.0.1",
        rest_port=8501,
        grpc_port=8500,
        batching=True,
        max_batch_size=32,
        batch_timeout_s=0.002,
        max_enqueued=256,
        num_threads=4,
        limits=None,
        poll_seconds=1.0,
        warm_up=True,
        drain_seconds=30.0,
        warmup_seconds=WARMUP_SECONDS,
        policy=None,
        labels=None,
    ):
        self.host = host
        self.drain_seconds = float(drain_seconds)
        limits = limits or Limits()
        self.models = ModelManager(
            model_name,
            base_dir,
            poll_seconds=poll_seconds,
            warm_up=warm_up,
            on_event=events.info,
            limits=limits,
            warmup_seconds=warmup_seconds,
            policy=policy,
            labels=labels,
        )
        self.engine = Engine(
            batching=batching,
            max_batch_size=max_batch_size,
            batch_timeout_s=batch_timeout_s,
            max_enqueued=max_enqueued,
            num_threads=num_threads,
        )
        self.service = Service(self.models, self.engine, limits)
        self._want_rest, self._want_grpc = rest_port, grpc_port
        self.rest_port = self.grpc_port = None
        self._grpc = None
        self._uvicorn = None
        self._thread = None

    def start(self):
        """Loads the model, binds the ports and serves in the background;
        returns ``self`` once both APIs answer."""
        self.models.load_latest()
        if self.models.latest_version() is None:
            raise FileNotFoundError(
                f"no loadable version (numeric subdirectory with "
                f"saved_model.pb) in {self.models.base_dir!r} under the "
                f"policy {self.models.policy!r}: "
                f"{sorted(self.models._status.items())}"
            )
        self.models.check_labels()
        self.models.start_polling()
        if self._want_grpc is not None:
            self._grpc, self.grpc_port = start_grpc_server(
                self.service, self.host, self._want_grpc
            )
        if self._want_rest is not None:
            self._start_rest()
        return self

    def _start_rest(self):
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Inherited by accepted connections: without it a response's
        # headers and body (two writes) wait for the client's delayed ACK
        # (40 ms a request on Linux).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((self.host, self._want_rest))
        self.rest_port = sock.getsockname()[1]
        limits = self.service.limits
        config = uvicorn.Config(
            build_app(self.service),
            http=bounded_protocol(
                limits.read_timeout_s, limits.max_connections
            ),
            log_config=None,
            access_log=False,  # the app writes one line with its latency
            timeout_graceful_shutdown=self.drain_seconds,
            lifespan="off",
        )
        self._uvicorn = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._uvicorn.serve(sockets=[sock])),
            name="keras-rnnlm-rest",
            daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._uvicorn.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the REST server did not start")
            time.sleep(0.01)

    def stop(self):
        """Stops taking requests; in-flight ones finish (up to
        ``drain_seconds``)."""
        grpc_stop = None
        if self._grpc is not None:
            # Both APIs drain at once.
            grpc_stop = threading.Thread(
                target=self._grpc.stop, args=(self.drain_seconds,)
            )
            grpc_stop.start()
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True
            self._thread.join(self.drain_seconds + 5)
        if grpc_stop is not None:
            grpc_stop.join(self.drain_seconds + 15)
        self.engine.close(wait=True)
        self.models.stop()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def serve_forever(server):
    """Runs ``server`` until SIGTERM or SIGINT, then drains and stops."""
    done = threading.Event()

    def handler(signum, frame):
        events.info("signal %d: draining in-flight requests", signum)
        done.set()

    previous = {
        s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)
    }
    try:
        server.start()
        events.info(
            "serving model %r version %s: REST on %s:%s, gRPC on %s:%s",
            server.models.name,
            server.models.latest_version(),
            server.host,
            server.rest_port,
            server.host,
            server.grpc_port,
        )
        while not done.wait(0.5):
            pass
    finally:
        server.stop()
        for s, h in previous.items():
            signal.signal(s, h)
        events.info("stopped")
