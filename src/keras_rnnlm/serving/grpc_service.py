"""TF Serving's gRPC API (``grpc.aio``, the protos of
``tensorflow-serving-api``).

``tensorflow.serving.PredictionService``: ``Predict`` and
``GetModelMetadata`` (``Classify``, ``Regress``, ``MultiInference`` answer
UNIMPLEMENTED); ``tensorflow.serving.ModelService``: ``GetModelStatus``.
A ``ModelSpec`` names its version by number, by ``version_label`` (the
model config's labels; an unknown one is INVALID_ARGUMENT "Unrecognized
servable version label", as in TF Serving's ``ServerCore``) or not at all
(the highest available). Outputs are written to the typed fields of each
``TensorProto`` (``float_val``, ``int_val``, ``string_val``...), TF
Serving's default ("serialize as proto fields").

The server runs on its own asyncio event loop in one thread: a call waits
for its batch without holding a thread, so throughput grows with the
number of clients up to what the engine runs, not up to a thread pool.
"""

import asyncio
import logging
import threading
import time

import grpc
from tensorflow_serving.apis import get_model_metadata_pb2
from tensorflow_serving.apis import get_model_status_pb2
from tensorflow_serving.apis import model_service_pb2_grpc
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_service_pb2_grpc
from tensorflow_serving.apis import status_pb2

from keras_rnnlm.serving.errors import ServingError
from keras_rnnlm.serving.requests import check_inputs
from keras_rnnlm.serving.requests import from_tensor_protos
from keras_rnnlm.serving.requests import row_steps
from keras_rnnlm.serving.requests import to_tensor_proto

_STATES = get_model_status_pb2.ModelVersionStatus.State
_events = logging.getLogger("keras_rnnlm.serving")


def _choice(spec):
    """``(version, label)`` of a ``ModelSpec`` (None where unset)."""
    which = spec.WhichOneof("version_choice")
    if which == "version":
        return spec.version.value, None
    if which == "version_label":
        return None, spec.version_label
    return None, None


def _check_name(service, spec):
    if not spec.name:
        raise ServingError(
            "INVALID_ARGUMENT", "ModelSpec has no name specified."
        )
    if spec.name != service.models.name:
        raise ServingError(
            "NOT_FOUND",
            f"Servable not found for request: Latest({spec.name})",
        )


async def _answer(service, method, signature, context, body):
    """Runs ``body()`` (a coroutine function); a :class:`ServingError`
    aborts the call with its code, anything else with INTERNAL; one
    access line either way."""
    t0 = time.perf_counter()
    code, error = "OK", None
    try:
        return await body()
    except ServingError as e:
        code, error = e.code, e
    except Exception as e:  # noqa: BLE001  (a bug: INTERNAL, not UNKNOWN)
        _events.exception("gRPC %s failed", method)
        code = "INTERNAL"
        error = ServingError("INTERNAL", f"{type(e).__name__}: {e}")
    finally:
        service.log_access(
            "grpc", method, signature, code, time.perf_counter() - t0
        )
    await context.abort(getattr(grpc.StatusCode, error.code), error.message)


class _Predictions(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, service):
        self.service = service

    async def Predict(self, request, context):  # noqa: N802  (the proto's)
        name = request.model_spec.signature_name or "serving_default"
        return await _answer(
            self.service,
            "Predict",
            name,
            context,
            lambda: self._predict(request, name),
        )

    async def _predict(self, request, name):
        service = self.service
        _check_name(service, request.model_spec)
        servable = service.models.servable(*_choice(request.model_spec))
        signature = service.signature(servable, name)
        arrays = from_tensor_protos(signature, request.inputs, service.limits)
        check_inputs(signature, arrays, service.limits, servable)
        wanted = list(request.output_filter) or signature.outputs
        unknown = set(wanted) - set(signature.outputs)
        if unknown:
            raise ServingError(
                "INVALID_ARGUMENT",
                f"output tensor alias not found in signature: "
                f"{sorted(unknown)[0]} (outputs: {signature.outputs})",
            )
        outputs = await service.engine.run(
            signature,
            arrays,
            row_steps(signature, arrays, servable),
            service.limits.request_timeout_s,
        )
        response = predict_pb2.PredictResponse()
        response.model_spec.name = service.models.name
        response.model_spec.version.value = servable.version
        response.model_spec.signature_name = signature.name
        for key in wanted:
            response.outputs[key].CopyFrom(to_tensor_proto(outputs[key]))
        return response

    async def GetModelMetadata(self, request, context):  # noqa: N802
        return await _answer(
            self.service,
            "GetModelMetadata",
            "",
            context,
            lambda: self._metadata(request),
        )

    async def _metadata(self, request):
        service = self.service
        _check_name(service, request.model_spec)
        fields = list(request.metadata_field)
        if not fields:
            raise ServingError(
                "INVALID_ARGUMENT",
                "GetModelMetadataRequest must specify at least one "
                "metadata_field",
            )
        for field in fields:
            if field != "signature_def":
                raise ServingError(
                    "INVALID_ARGUMENT",
                    f"Metadata field {field} is not supported",
                )
        servable = service.models.servable(*_choice(request.model_spec))
        sig_map = get_model_metadata_pb2.SignatureDefMap()
        for k, v in servable.signature_defs.items():
            sig_map.signature_def[k].CopyFrom(v)
        response = get_model_metadata_pb2.GetModelMetadataResponse()
        response.model_spec.name = service.models.name
        response.model_spec.version.value = servable.version
        response.metadata["signature_def"].Pack(sig_map)
        return response


class _Models(model_service_pb2_grpc.ModelServiceServicer):
    def __init__(self, service):
        self.service = service

    async def GetModelStatus(self, request, context):  # noqa: N802
        return await _answer(
            self.service,
            "GetModelStatus",
            "",
            context,
            lambda: self._status(request),
        )

    async def _status(self, request):
        service = self.service
        if not request.HasField("model_spec"):
            raise ServingError("INVALID_ARGUMENT", "Missing ModelSpec")
        _check_name(service, request.model_spec)
        response = get_model_status_pb2.GetModelStatusResponse()
        for v, state, code, message in service.models.status(
            *_choice(request.model_spec)
        ):
            status = response.model_version_status.add()
            status.version = v
            status.state = _STATES.Value(state)
            status.status.error_code = _error_code(code)
            status.status.error_message = message
        return response


def _error_code(name):
    field = status_pb2.StatusProto.DESCRIPTOR.fields_by_name["error_code"]
    return field.enum_type.values_by_name[name].number


class GrpcServer:
    """The gRPC server on its own event loop thread.

    Args:
        service: the :class:`~keras_rnnlm.serving.server.Service`.
        host, port: where to listen (``port=0``: a free one).
        max_concurrent_rpcs: calls in progress at once; more are answered
            RESOURCE_EXHAUSTED by grpc.
    """

    def __init__(self, service, host, port, max_concurrent_rpcs=4096):
        self.service = service
        self.host = host
        self.want_port = int(port)
        self.max_concurrent_rpcs = int(max_concurrent_rpcs)
        self.port = None
        self._loop = None
        self._server = None
        self._thread = None
        self._ready = threading.Event()
        self._error = None

    def start(self):
        """Binds and starts serving; returns the bound port."""
        self._thread = threading.Thread(
            target=self._main, name="keras-rnnlm-grpc", daemon=True
        )
        self._thread.start()
        if not self._ready.wait(60):
            raise RuntimeError("the gRPC server did not start")
        if self._error is not None:
            raise self._error
        return self.port

    def _main(self):
        self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve())
            # grpc.aio's own tasks end with the loop, not after it.
            pending = asyncio.all_tasks(self._loop)
            for task in pending:
                task.cancel()
            self._loop.run_until_complete(
                asyncio.gather(*pending, return_exceptions=True)
            )
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        finally:
            self._loop.close()

    async def _serve(self):
        limits = self.service.limits
        try:
            server = grpc.aio.server(
                options=[
                    ("grpc.max_receive_message_length", limits.max_body_bytes),
                    ("grpc.max_send_message_length", 256 * 1024 * 1024),
                    ("grpc.so_reuseport", 0),
                ],
                maximum_concurrent_rpcs=self.max_concurrent_rpcs,
            )
            prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
                _Predictions(self.service), server
            )
            model_service_pb2_grpc.add_ModelServiceServicer_to_server(
                _Models(self.service), server
            )
            port = server.add_insecure_port(f"{self.host}:{self.want_port}")
            if port == 0:
                raise OSError(
                    f"cannot bind the gRPC server to {self.host}:"
                    f"{self.want_port}"
                )
            await server.start()
        except Exception as e:  # noqa: BLE001  (raised by start())
            self._error = e
            self._ready.set()
            return
        self._server, self.port = server, port
        self._ready.set()
        await server.wait_for_termination()

    def stop(self, grace):
        """Stops taking calls; in-flight ones get ``grace`` seconds."""
        if self._server is None or self._loop is None:
            return
        future = asyncio.run_coroutine_threadsafe(
            self._server.stop(grace), self._loop
        )
        try:
            future.result(grace + 10)
        except Exception:  # noqa: BLE001, S110  (stopping anyway)
            pass
        self._thread.join(grace + 10)


def start_grpc_server(service, host, port):
    """Starts the gRPC server; returns ``(GrpcServer, bound_port)``."""
    server = GrpcServer(service, host, port)
    return server, server.start()
