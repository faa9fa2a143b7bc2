"""TF Serving's REST API on starlette (served by uvicorn).

    GET  /v1/models/NAME[/versions/N | /labels/L]            status
    GET  /v1/models/NAME[/versions/N | /labels/L]/metadata   signature defs
    POST /v1/models/NAME[/versions/N | /labels/L]:predict    row or columnar

The paths are matched as TF Serving matches them
(``model_servers/http_rest_api_util.cc``, case-insensitive); any other
path under ``/v1/`` is INVALID_ARGUMENT "Malformed request" (400), one
outside it 404. Every error is ``{"error": "..."}`` with TF Serving's HTTP
code for its status (:data:`~keras_rnnlm.serving.errors.HTTP_STATUS`),
413 for a body over ``--max-body-bytes``.
"""

import json
import logging
import re
import time

from google.protobuf import json_format
from starlette.requests import ClientDisconnect
from starlette.requests import Request
from starlette.responses import Response

from keras_rnnlm.serving.errors import ServingError
from keras_rnnlm.serving.requests import check_inputs
from keras_rnnlm.serving.requests import format_predict
from keras_rnnlm.serving.requests import parse_predict
from keras_rnnlm.serving.requests import row_steps

_SPEC = r"(?:/versions/(?P<version>\d+)|/labels/(?P<label>[^/:]+))?"
_PREDICT = re.compile(
    r"/v1/models/(?P<name>[^/:]+)"
    + _SPEC
    + r":(?P<verb>classify|regress|predict)",
    re.IGNORECASE,
)
_STATUS = re.compile(
    r"/v1/models(?:/(?P<name>[^/:]+))?" + _SPEC + r"(?P<metadata>/metadata)?",
    re.IGNORECASE,
)
_events = logging.getLogger("keras_rnnlm.serving")


def _json(payload, status=200):
    # NaN / Infinity as TF Serving writes them (a score of an unknown
    # token without <unk> is -Infinity); non-ASCII escaped, so that any
    # text (even a lone surrogate echoed in an error) can be sent.
    return Response(
        json.dumps(payload, allow_nan=True),
        status_code=status,
        media_type="application/json",
    )


def _error(error):
    return _json({"error": error.message}, error.http_status)


def status_json(service, version, label=None):
    return {
        "model_version_status": [
            {
                "version": str(v),
                "state": state,
                "status": {"error_code": code, "error_message": message},
            }
            for v, state, code, message in service.models.status(version, label)
        ]
    }


def metadata_json(service, version, label=None):
    servable = service.models.servable(version, label)
    return {
        "model_spec": {
            "name": service.models.name,
            "signature_name": "",
            "version": str(servable.version),
        },
        "metadata": {
            "signature_def": {
                "signature_def": {
                    k: json_format.MessageToDict(
                        v, preserving_proto_field_name=True
                    )
                    for k, v in sorted(servable.signature_defs.items())
                }
            }
        },
    }


def build_app(service):
    """The ASGI app of a :class:`~keras_rnnlm.serving.server.Service`:
    every path and method reaches :func:`_dispatch` (no router, no
    redirects, no plain-text answers)."""

    async def dispatch(request):
        t0 = time.perf_counter()
        code = "OK"
        try:
            response = await _dispatch(service, request)
        except ServingError as e:
            code, response = e.code, _error(e)
        except RecursionError:
            code = "INVALID_ARGUMENT"
            response = _error(
                ServingError(
                    "INVALID_ARGUMENT",
                    "JSON Parse error: the document is nested too deeply",
                )
            )
        except Exception as e:  # noqa: BLE001  (a bug: JSON 500, logged)
            _events.exception(
                "REST %s %s failed", request.method, request.url.path
            )
            code = "INTERNAL"
            response = _error(
                ServingError("INTERNAL", f"{type(e).__name__}: {e}")
            )
        service.log_access(
            "rest",
            request.method,
            request.url.path,
            code,
            time.perf_counter() - t0,
            response.status_code,
        )
        return response

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return  # no lifespan, no websockets
        response = await dispatch(Request(scope, receive))
        await response(scope, receive, send)

    return app


def _version(m):
    return None if m["version"] is None else int(m["version"])


async def _dispatch(service, request):
    path, method = request.url.path, request.method
    m = None
    if method == "POST":
        m = _PREDICT.fullmatch(path)
    elif method == "GET":
        m = _STATUS.fullmatch(path)
    if m is None:
        if not path.lower().startswith("/v1/"):
            raise ServingError("NOT_FOUND", f"Not found: {method} {path}")
        raise ServingError(
            "INVALID_ARGUMENT", f"Malformed request: {method} {path}"
        )
    name = m["name"]
    if not name:
        raise ServingError("INVALID_ARGUMENT", "Missing model name in request.")
    if name != service.models.name:
        raise ServingError(
            "NOT_FOUND",
            f"Servable not found for request: Latest({name})",
        )
    version, label = _version(m), m["label"]
    if method == "GET":
        if m["metadata"]:
            return _json(metadata_json(service, version, label))
        return _json(status_json(service, version, label))
    if m["verb"].lower() != "predict":
        raise ServingError(
            "UNIMPLEMENTED",
            f"POST {path}: only :predict is served (not :{m['verb']})",
        )
    return _json(await _predict(service, request, version, label))


async def _read_body(request, limit):
    size = request.headers.get("content-length")
    if size is not None and size.isdigit() and int(size) > limit:
        raise ServingError(
            "RESOURCE_EXHAUSTED",
            f"request body of {size} bytes > {limit} (--max-body-bytes)",
            http_status=413,
        )
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise ServingError(
                    "RESOURCE_EXHAUSTED",
                    f"request body > {limit} bytes (--max-body-bytes)",
                    http_status=413,
                )
    except ClientDisconnect:
        raise ServingError("CANCELLED", "client disconnected") from None
    return bytes(body)


async def _predict(service, request, version, label):
    limits = service.limits
    servable = service.models.servable(version, label)
    body = await _read_body(request, limits.max_body_bytes)
    if not body.strip():
        raise ServingError(
            "INVALID_ARGUMENT", "JSON Parse error: The document is empty"
        )
    try:
        parsed = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise ServingError(
            "INVALID_ARGUMENT", f"JSON Parse error: {e}"
        ) from None
    signature, arrays, row = parse_predict(
        parsed, lambda n: service.signature(servable, n), limits
    )
    check_inputs(signature, arrays, limits, servable)
    outputs = await service.engine.run(
        signature,
        arrays,
        row_steps(signature, arrays, servable),
        limits.request_timeout_s,
    )
    return format_predict(outputs, row)
