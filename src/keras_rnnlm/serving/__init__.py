"""Serving exported SavedModels with TF Serving's REST and gRPC APIs.

``keras-rnnlm serve MODEL_BASE_DIR --model-name NAME`` (see
:mod:`keras_rnnlm.cli.serve` and ``docs/scoring.md``): REST on uvicorn +
starlette, gRPC on grpcio with the protos of ``tensorflow-serving-api``,
versions hot-swapped from numeric subdirectories, server-side batching,
request limits. :class:`Server` and :func:`serve_forever` are imported on
first use (gRPC and the serving protos load only for the server).
"""

from keras_rnnlm.serving.errors import ServingError
from keras_rnnlm.serving.limits import Limits

__all__ = ["Limits", "Server", "ServingError", "serve_forever"]


def __getattr__(name):
    if name in ("Server", "serve_forever"):
        from keras_rnnlm.serving import server  # gRPC: loaded to serve only

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
