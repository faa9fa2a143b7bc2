"""The server's per-request limits and start-up defaults.

Kept apart from the request parsing (which needs TensorFlow): plain
values that the server, the bench and the tests share without loading
TensorFlow.
"""

import dataclasses

#: Default time budget of the server's warm-up
#: (:func:`keras_rnnlm.serving.warmup.warm_up_buckets`), seconds.
WARMUP_SECONDS = 60.0


@dataclasses.dataclass(frozen=True)
class Limits:
    """Per-request limits of the server.

    Attributes:
        max_body_bytes: size of a REST body / gRPC message.
        max_rows: rows (sentences, prefixes, token rows) per request.
        max_sentence_tokens: tokens of one sentence or prefix (words or
            characters, as the model tokenises; ``score_ids``: lengths and
            width; ``step``: time steps).
        request_timeout_s: a request not answered in this time gets
            DEADLINE_EXCEEDED (REST 504).
        read_timeout_s: REST: a request's headers and body must arrive
            within this time of the connection opening (or of the
            previous answer on a kept-alive connection); else 408 and
            the connection is closed.
        max_connections: open REST connections; one more is answered
            503 and closed.
    """

    max_body_bytes: int = 4 * 1024 * 1024
    max_rows: int = 1024
    max_sentence_tokens: int = 1024
    request_timeout_s: float = 30.0
    read_timeout_s: float = 30.0
    max_connections: int = 1024
