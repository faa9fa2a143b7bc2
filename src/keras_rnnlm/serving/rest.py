"""TF Serving's REST API on starlette (served by uvicorn).

    GET  /v1/models/NAME[/versions/N]            version status
    GET  /v1/models/NAME[/versions/N]/metadata   signature defs
    POST /v1/models/NAME[/versions/N]:predict    row or columnar format

Errors are ``{"error": "..."}`` with a 4xx (or 503 when overloaded or
timed out), as TF Serving answers them.
"""

import asyncio
import json
import re

from google.protobuf import json_format
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect
from starlette.responses import JSONResponse
from starlette.responses import Response
from starlette.routing import Route

from keras_rnnlm.serving.errors import ServingError
from keras_rnnlm.serving.requests import check_inputs
from keras_rnnlm.serving.requests import format_predict
from keras_rnnlm.serving.requests import parse_predict

_PATH = re.compile(
    r"^/v1/models/(?P<name>[^/:]+)(?:/versions/(?P<version>\d+))?"
    r"(?:(?P<metadata>/metadata)|:(?P<verb>predict|classify|regress))?$"
)


def _json(payload, status=200):
    # NaN / Infinity as TF Serving writes them (a score of an unknown
    # token without <unk> is -Infinity).
    return Response(
        json.dumps(payload, allow_nan=True),
        status_code=status,
        media_type="application/json",
    )


def _error(error):
    return JSONResponse({"error": error.message}, status_code=error.http_status)


def status_json(service, version):
    return {
        "model_version_status": [
            {
                "version": str(v),
                "state": state,
                "status": {"error_code": code, "error_message": message},
            }
            for v, state, code, message in service.models.status(version)
        ]
    }


def metadata_json(service, version):

    servable = service.models.servable(version)
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
    """The starlette app of a :class:`~keras_rnnlm.serving.server.Service`."""

    async def dispatch(request):
        try:
            return await _dispatch(service, request)
        except ServingError as e:
            return _error(e)

    return Starlette(
        routes=[
            Route("/v1/models/{rest:path}", dispatch, methods=["GET", "POST"])
        ]
    )


async def _dispatch(service, request):
    m = _PATH.match(request.url.path)
    if m is None:
        raise ServingError(
            "NOT_FOUND", f"Malformed request: {request.url.path}"
        )
    name, version = m["name"], m["version"]
    if name != service.models.name:
        raise ServingError(
            "NOT_FOUND",
            f"Servable not found for request: Latest({name})",
        )
    if request.method == "GET":
        if m["verb"]:
            raise ServingError(
                "INVALID_ARGUMENT", f"{m['verb']} needs a POST request"
            )
        if m["metadata"]:
            return _json(metadata_json(service, version))
        return _json(status_json(service, version))
    if m["verb"] != "predict":
        raise ServingError(
            "UNIMPLEMENTED" if m["verb"] else "INVALID_ARGUMENT",
            f"POST {request.url.path}: only :predict is served",
        )
    return _json(await _predict(service, request, version))


async def _predict(service, request, version):
    limits = service.limits
    size = request.headers.get("content-length")
    if (
        size is not None
        and size.isdigit()
        and int(size) > limits.max_body_bytes
    ):
        raise ServingError(
            "RESOURCE_EXHAUSTED",
            f"request body of {size} bytes > {limits.max_body_bytes} "
            "(--max-body-bytes)",
        )
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > limits.max_body_bytes:
                raise ServingError(
                    "RESOURCE_EXHAUSTED",
                    f"request body > {limits.max_body_bytes} bytes "
                    "(--max-body-bytes)",
                )
    except ClientDisconnect:
        raise ServingError("INVALID_ARGUMENT", "client disconnected") from None
    try:
        parsed = json.loads(bytes(body))
    except (ValueError, UnicodeDecodeError) as e:
        raise ServingError(
            "INVALID_ARGUMENT", f"JSON Parse error: {e}"
        ) from None
    servable = service.models.servable(version)
    signature, arrays, row = parse_predict(
        parsed, lambda n: service.signature(servable, n), limits
    )
    check_inputs(signature, arrays, limits, servable)
    future = service.engine.submit(signature, arrays)
    try:
        outputs = await asyncio.wait_for(
            asyncio.wrap_future(future), limits.request_timeout_s
        )
    except asyncio.TimeoutError:
        raise ServingError(
            "DEADLINE_EXCEEDED",
            f"request not answered in {limits.request_timeout_s} s "
            "(--request-timeout)",
        ) from None
    return format_predict(outputs, row)
