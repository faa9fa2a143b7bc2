"""One error type for the server, with TF Serving's status codes.

A :class:`ServingError` carries a canonical status code name (the names of
``tensorflow/core/protobuf/error_codes.proto``, as TF Serving reports
them); REST answers it with :data:`HTTP_STATUS` and ``{"error": message}``,
gRPC aborts the call with the same code.
"""

#: TF Serving's status -> HTTP code (``ToHTTPStatusCode`` in
#: ``tensorflow_serving/model_servers/http_server.cc``).
HTTP_STATUS = {
    "CANCELLED": 499,
    "UNKNOWN": 500,
    "INVALID_ARGUMENT": 400,
    "DEADLINE_EXCEEDED": 504,
    "NOT_FOUND": 404,
    "ALREADY_EXISTS": 409,
    "PERMISSION_DENIED": 403,
    "RESOURCE_EXHAUSTED": 429,
    "FAILED_PRECONDITION": 400,
    "ABORTED": 409,
    "OUT_OF_RANGE": 400,
    "UNIMPLEMENTED": 501,
    "INTERNAL": 500,
    "UNAVAILABLE": 503,
    "DATA_LOSS": 500,
    "UNAUTHENTICATED": 401,
}


class ServingError(Exception):
    """A request the server refuses or cannot answer."""

    def __init__(self, code, message, http_status=None):
        super().__init__(message)
        if code not in HTTP_STATUS:
            raise ValueError(f"unknown status code {code!r}")
        self.code = code
        self.message = message
        # Only a REST body over --max-body-bytes overrides the mapping
        # (413 Content Too Large for RESOURCE_EXHAUSTED).
        self._http_status = http_status

    @property
    def http_status(self):
        return self._http_status or HTTP_STATUS[self.code]


def from_tf_error(error):
    """A :class:`ServingError` for a TensorFlow ``OpError`` raised by a
    signature (its canonical code: a failed in-graph check is
    INVALID_ARGUMENT)."""
    import tensorflow as tf  # only reached after a TensorFlow call

    codes = {
        tf.errors.InvalidArgumentError: "INVALID_ARGUMENT",
        tf.errors.OutOfRangeError: "OUT_OF_RANGE",
        tf.errors.FailedPreconditionError: "FAILED_PRECONDITION",
        tf.errors.ResourceExhaustedError: "RESOURCE_EXHAUSTED",
        tf.errors.UnavailableError: "UNAVAILABLE",
        tf.errors.DeadlineExceededError: "DEADLINE_EXCEEDED",
    }
    code = codes.get(type(error), "INTERNAL")
    return ServingError(code, error_message(error.message or ""))


def error_message(text):
    """The line of a TensorFlow error text that says what went wrong (an
    assertion's message, a shape or dtype mismatch), without the graph
    execution preamble."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for key in ("assertion failed", "is not compatible", "expected to be"):
        for line in lines:
            if key in line:
                return line
    skip = ("Graph execution error", "Detected at node")
    rest = [line for line in lines if not line.startswith(skip)]
    return (rest or lines or ["error"])[0]
