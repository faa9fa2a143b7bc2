"""``keras-rnnlm serve``: TF Serving's REST and gRPC APIs for an export.

    keras-rnnlm serve (MODEL_BASE_DIR --model-name NAME
                       | --model-config-file FILE)
        [--rest-port 8501] [--grpc-port 8500] [--host 127.0.0.1]
        [--no-batching] [--max-batch-size 32] [--batch-timeout-micros 2000]
        [--max-enqueued 256] [--num-threads 4]
        [--max-body-bytes N] [--max-rows N] [--max-sentence-tokens N]
        [--request-timeout S] [--read-timeout S] [--max-connections N]
        [--poll-seconds S] [--no-warmup] [--warmup-seconds S]
        [--access-log FILE]

MODEL_BASE_DIR holds numeric version subdirectories (``keras-rnnlm export
RUN models/NAME/1``); the highest is served and a new one is picked up
while running (removing it rolls back to the one below).
``--model-config-file`` takes TF Serving's model config (text
``ModelServerConfig``, one model): its name, base path, version policy
(``latest``, ``all``, ``specific``) and version labels. Each version is
warmed up before it is served: its
``assets.extra/tf_serving_warmup_requests`` (TF Serving's format) is
replayed, then every time bucket up to ``--max-sentence-tokens`` is called
once (within ``--warmup-seconds``). SIGTERM (or Ctrl-C) lets in-flight
requests finish.
"""

import errno
import logging
import os
import sys

from keras_rnnlm.cli.errors import UsageError
from keras_rnnlm.cli.train import options_of
from keras_rnnlm.export.tensorflow_only import require_tensorflow
from keras_rnnlm.serving.limits import Limits


def _logging(access_path):
    fmt = logging.Formatter("%(asctime)s %(name)s %(message)s")
    events = logging.getLogger("keras_rnnlm.serving")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(fmt)
    events.addHandler(handler)
    events.setLevel(logging.INFO)
    events.propagate = False
    access = (
        logging.StreamHandler(sys.stderr)
        if access_path in (None, "-")
        else logging.FileHandler(access_path)
    )
    access.setFormatter(fmt)
    for name in ("keras_rnnlm.serving.access", "uvicorn.access"):
        log = logging.getLogger(name)
        log.handlers = [access]
        log.setLevel(logging.INFO)
        log.propagate = False
    errors = logging.getLogger("uvicorn.error")
    errors.handlers = [handler]
    errors.setLevel(logging.INFO)


def run_serve(args):
    """``keras-rnnlm serve``; a per-request limit not given is
    :class:`~keras_rnnlm.serving.limits.Limits`'s default."""
    require_tensorflow("keras-rnnlm serve")
    from keras_rnnlm.serving.server import Server  # gRPC: only to serve
    from keras_rnnlm.serving.server import serve_forever

    policy = labels = None
    config_file = getattr(args, "model_config_file", None)
    if config_file:
        from keras_rnnlm.serving.model_config import (  # protobuf: on use
            read_model_config,
        )

        if args.base_dir or args.model_name:
            raise UsageError(
                "give MODEL_BASE_DIR and --model-name, or --model-config-file"
            )
        try:
            config = read_model_config(config_file)
        except ValueError as e:
            raise UsageError(str(e)) from None
        args.model_name, args.base_dir = config.name, config.base_path
        policy, labels = config.policy, config.labels
    elif not (args.base_dir and args.model_name):
        raise UsageError(
            "give MODEL_BASE_DIR and --model-name, or --model-config-file"
        )
    if not os.path.isdir(args.base_dir):
        raise FileNotFoundError(
            errno.ENOENT, os.strerror(errno.ENOENT), args.base_dir
        )
    defaults = Limits()
    for flag, default in (
        ("max_body_bytes", defaults.max_body_bytes),
        ("max_rows", defaults.max_rows),
        ("max_sentence_tokens", defaults.max_sentence_tokens),
        ("request_timeout", defaults.request_timeout_s),
        ("read_timeout", defaults.read_timeout_s),
        ("max_connections", defaults.max_connections),
    ):
        if getattr(args, flag, None) is None:
            setattr(args, flag, default)
    if args.warmup_seconds < 0:
        raise UsageError("--warmup-seconds must be >= 0")
    for flag in ("max_batch_size", "max_enqueued", "num_threads", "max_rows"):
        if getattr(args, flag) < 1:
            raise UsageError(f"--{flag.replace('_', '-')} must be >= 1")
    _logging(args.access_log)
    if args.read_timeout <= 0 or args.max_connections < 1:
        raise UsageError("--read-timeout must be > 0, --max-connections >= 1")
    limits = Limits(
        request_timeout_s=args.request_timeout,
        read_timeout_s=args.read_timeout,
        **options_of(
            args, "max_body_bytes max_rows max_sentence_tokens max_connections"
        ),
    )
    server = Server(
        args.model_name,
        args.base_dir,
        batching=not args.no_batching,
        batch_timeout_s=args.batch_timeout_micros / 1e6,
        limits=limits,
        warm_up=not args.no_warmup,
        policy=policy,
        labels=labels,
        **options_of(
            args,
            "host rest_port grpc_port max_batch_size max_enqueued "
            "num_threads poll_seconds drain_seconds warmup_seconds",
        ),
    )
    serve_forever(server)
    return 0
