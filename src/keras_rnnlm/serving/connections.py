"""REST connections that no client can hold: a read deadline and a cap.

uvicorn's h11 protocol, with two bounds that it lacks:

* a request's headers and body must arrive within ``read_timeout_s`` of
  the connection opening (or of the previous answer on a kept-alive
  connection). A client that stalls before its headers are complete gets
  408 ``{"error": ...}`` and the connection is closed; one that stalls in
  its body likewise, and the request (waiting for its body) ends as a
  disconnect. A request whose body has arrived is bounded by
  ``--request-timeout`` instead.
* at most ``max_connections`` connections are open; one more is answered
  503 ``{"error": ...}`` and closed at once.

A request line or headers that h11 cannot parse get 400 with a JSON body
(uvicorn's own answer is plain text).
"""

import json
import logging

from uvicorn.protocols.http.h11_impl import H11Protocol

_events = logging.getLogger("keras_rnnlm.serving")

_REASONS = {
    400: b"Bad Request",
    408: b"Request Timeout",
    503: b"Service Unavailable",
}


def raw_error(status, message):
    """The bytes of an HTTP/1.1 answer ``{"error": message}`` that closes
    the connection (written without h11: the request may be unfinished)."""
    body = json.dumps({"error": message}).encode("ascii")
    head = (
        b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\nconnection: close\r\n\r\n"
        % (status, _REASONS[status], len(body))
    )
    return head + body


def bounded_protocol(read_timeout_s, max_connections):
    """An ``H11Protocol`` subclass with the read deadline and the cap
    (uvicorn's ``Config(http=...)``)."""

    class BoundedH11Protocol(H11Protocol):
        def connection_made(self, transport):
            super().connection_made(transport)
            self._read_timer = None
            if len(self.connections) > max_connections:
                _events.warning(
                    "REST connection refused: %d open (--max-connections)",
                    max_connections,
                )
                transport.write(
                    raw_error(
                        503,
                        f"server overloaded: {max_connections} connections "
                        "open (--max-connections); retry later",
                    )
                )
                transport.close()
                return
            self._arm()

        def _arm(self):
            self._disarm()
            self._read_timer = self.loop.call_later(
                read_timeout_s, self._read_timed_out
            )

        def _disarm(self):
            timer = getattr(self, "_read_timer", None)
            if timer is not None:
                timer.cancel()
                self._read_timer = None

        def _read_timed_out(self):
            self._read_timer = None
            if self.transport.is_closing():
                return
            cycle = self.cycle
            if cycle is not None and not cycle.response_complete:
                if not cycle.more_body:
                    return  # the body is in: --request-timeout bounds it
                # The body stalled: the waiting request sees a disconnect.
                cycle.disconnected = True
                cycle.message_event.set()
            _events.warning(
                "REST connection from %s closed: request not received "
                "in %.1f s (--read-timeout)",
                self.client,
                read_timeout_s,
            )
            self.transport.write(
                raw_error(
                    408,
                    f"request headers and body not received in "
                    f"{read_timeout_s:g} s (--read-timeout)",
                )
            )
            self.transport.close()

        def on_response_complete(self):
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()  # the next request on a kept-alive connection

        def connection_lost(self, exc):
            self._disarm()
            super().connection_lost(exc)

        def send_400_response(self, msg):
            self.transport.write(raw_error(400, msg))
            self.transport.close()

    return BoundedH11Protocol
