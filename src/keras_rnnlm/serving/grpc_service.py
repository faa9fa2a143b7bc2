"""TF Serving's gRPC API (grpcio, the protos of ``tensorflow-serving-api``).

``tensorflow.serving.PredictionService``: ``Predict`` and
``GetModelMetadata`` (``Classify``, ``Regress``, ``MultiInference`` answer
UNIMPLEMENTED); ``tensorflow.serving.ModelService``: ``GetModelStatus``.
"""

import concurrent.futures
import time

import grpc
import tensorflow as tf
from tensorflow_serving.apis import get_model_metadata_pb2
from tensorflow_serving.apis import get_model_status_pb2
from tensorflow_serving.apis import model_service_pb2_grpc
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_service_pb2_grpc
from tensorflow_serving.apis import status_pb2

from keras_rnnlm.serving.errors import ServingError
from keras_rnnlm.serving.requests import check_inputs
from keras_rnnlm.serving.requests import from_tensor_protos

_STATES = get_model_status_pb2.ModelVersionStatus.State


def _abort(context, error):
    context.abort(getattr(grpc.StatusCode, error.code), error.message)


def _version(spec):
    return spec.version.value if spec.HasField("version") else None


def _check_name(service, spec):
    if spec.name != service.models.name:
        raise ServingError(
            "NOT_FOUND",
            f"Servable not found for request: Latest({spec.name})",
        )


class _Predictions(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, service):
        self.service = service

    def Predict(self, request, context):  # noqa: N802  (the proto's name)

        service = self.service
        t0 = time.perf_counter()
        code = "OK"
        try:
            _check_name(service, request.model_spec)
            servable = service.models.servable(_version(request.model_spec))
            signature = service.signature(
                servable, request.model_spec.signature_name or "serving_default"
            )
            arrays = from_tensor_protos(signature, request.inputs)
            check_inputs(signature, arrays, service.limits, servable)
            future = service.engine.submit(signature, arrays)
            try:
                outputs = future.result(service.limits.request_timeout_s)
            except concurrent.futures.TimeoutError:
                future.cancel()
                raise ServingError(
                    "DEADLINE_EXCEEDED",
                    f"request not answered in "
                    f"{service.limits.request_timeout_s} s (--request-timeout)",
                ) from None
            wanted = list(request.output_filter) or sorted(outputs)
            unknown = set(wanted) - set(outputs)
            if unknown:
                raise ServingError(
                    "INVALID_ARGUMENT",
                    f"output_filter names unknown outputs {sorted(unknown)}",
                )
            response = predict_pb2.PredictResponse()
            response.model_spec.name = service.models.name
            response.model_spec.version.value = servable.version
            response.model_spec.signature_name = signature.name
            for name in wanted:
                response.outputs[name].CopyFrom(
                    tf.make_tensor_proto(outputs[name])
                )
            return response
        except ServingError as e:
            code = e.code
            _abort(context, e)
        finally:
            service.log_access(
                "grpc",
                "Predict",
                request.model_spec.signature_name or "serving_default",
                code,
                time.perf_counter() - t0,
            )

    def GetModelMetadata(self, request, context):  # noqa: N802
        service = self.service
        try:
            _check_name(service, request.model_spec)
            fields = list(request.metadata_field)
            if fields != ["signature_def"]:
                raise ServingError(
                    "INVALID_ARGUMENT",
                    'metadata_field must be ["signature_def"]',
                )
            servable = service.models.servable(_version(request.model_spec))
            sig_map = get_model_metadata_pb2.SignatureDefMap()
            for k, v in servable.signature_defs.items():
                sig_map.signature_def[k].CopyFrom(v)
            response = get_model_metadata_pb2.GetModelMetadataResponse()
            response.model_spec.name = service.models.name
            response.model_spec.version.value = servable.version
            response.metadata["signature_def"].Pack(sig_map)
            service.log_access("grpc", "GetModelMetadata", "", "OK", 0.0)
            return response
        except ServingError as e:
            _abort(context, e)


class _Models(model_service_pb2_grpc.ModelServiceServicer):
    def __init__(self, service):
        self.service = service

    def GetModelStatus(self, request, context):  # noqa: N802
        service = self.service
        try:
            _check_name(service, request.model_spec)
            response = get_model_status_pb2.GetModelStatusResponse()
            for v, state, code, message in service.models.status(
                _version(request.model_spec)
            ):
                status = response.model_version_status.add()
                status.version = v
                status.state = _STATES.Value(state)
                status.status.error_code = _error_code(code)
                status.status.error_message = message
            return response
        except ServingError as e:
            _abort(context, e)


def _error_code(name):

    field = status_pb2.StatusProto.DESCRIPTOR.fields_by_name["error_code"]
    return field.enum_type.values_by_name[name].number


def start_grpc_server(service, host, port, max_workers=16):
    """Starts the gRPC server; returns ``(server, bound_port)``."""
    server = grpc.server(
        concurrent.futures.ThreadPoolExecutor(
            max_workers=max_workers, thread_name_prefix="keras-rnnlm-grpc"
        ),
        options=[
            ("grpc.max_receive_message_length", service.limits.max_body_bytes),
            ("grpc.max_send_message_length", 256 * 1024 * 1024),
            ("grpc.so_reuseport", 0),
        ],
    )
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
        _Predictions(service), server
    )
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(
        _Models(service), server
    )
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise OSError(f"cannot bind the gRPC server to {host}:{port}")
    server.start()
    return server, bound
