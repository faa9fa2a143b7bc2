"""A served copy of the shared tiny run: REST and gRPC on free loopback
ports, shared by the session and stopped at its end."""

import pytest


@pytest.fixture(scope="session")
def served_base(tiny_run, tmp_path_factory):
    """(run_dir, MODEL_BASE_DIR holding version 1 of the tiny run)."""
    from keras_rnnlm.export import export_saved_model

    base = tmp_path_factory.mktemp("serving") / "tiny_lm"
    export_saved_model(tiny_run, str(base / "1"))
    return tiny_run, str(base)


@pytest.fixture(scope="session")
def server(served_base):
    from keras_rnnlm.serving import Limits
    from keras_rnnlm.serving import Server

    limits = Limits(
        max_body_bytes=64 * 1024,
        max_rows=64,
        max_sentence_tokens=200,
        request_timeout_s=60,
    )
    srv = Server(
        "tiny_lm",
        served_base[1],
        rest_port=0,
        grpc_port=0,
        max_batch_size=16,
        batch_timeout_s=0.02,
        limits=limits,
        poll_seconds=0,
        drain_seconds=5,
    )
    srv.start()
    yield srv
    srv.stop()
