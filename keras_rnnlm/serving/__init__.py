"""Serving exported SavedModels with TF Serving's REST and gRPC APIs.

``keras-rnnlm serve MODEL_BASE_DIR --model-name NAME`` (see
:mod:`keras_rnnlm.cli.serve` and ``docs/scoring.md``): REST on uvicorn +
starlette, gRPC on grpcio with the protos of ``tensorflow-serving-api``,
versions hot-swapped from numeric subdirectories, server-side batching,
request limits.
"""

from keras_rnnlm.serving.errors import ServingError
from keras_rnnlm.serving.requests import Limits
from keras_rnnlm.serving.server import Server
from keras_rnnlm.serving.server import serve_forever

__all__ = ["Limits", "Server", "ServingError", "serve_forever"]
