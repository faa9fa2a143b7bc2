"""A served copy of the shared tiny run: REST and gRPC on free loopback
ports, shared by the session and stopped at its end."""

import pytest


@pytest.fixture(scope="session")
def served_base(tiny_export):
    """(run_dir, MODEL_BASE_DIR holding version 1 of the tiny run): the
    session's ``tiny_export`` (tests/conftest.py), shared with the export
    tests (a test that changes the versions copies it)."""
    import os

    run_dir, path = tiny_export
    return run_dir, os.path.dirname(path)


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


@pytest.fixture(scope="session")
def labelled_server(served_base, tmp_path_factory):
    """``keras-rnnlm serve --model-config-file``, a child process: versions
    1 and 2 of the tiny model (policy ``specific``), labels ``stable`` ->
    1 and ``canary`` -> 2, small limits (64 rows, 200 tokens, 64 KiB,
    a 2 s read timeout, 40 connections)."""
    import os
    import shutil

    from serving_client import ServerProcess

    root = tmp_path_factory.mktemp("labelled")
    base = root / "tiny_lm"
    for v in ("1", "2"):
        shutil.copytree(os.path.join(served_base[1], "1"), base / v)
    config = root / "models.config"
    config.write_text(
        "model_config_list {\n"
        "  config {\n"
        '    name: "tiny_lm"\n'
        '    base_path: "tiny_lm"\n'
        '    model_platform: "tensorflow"\n'
        "    model_version_policy { specific { versions: 1 versions: 2 } }\n"
        '    version_labels { key: "stable" value: 1 }\n'
        '    version_labels { key: "canary" value: 2 }\n'
        "  }\n"
        "}\n"
    )
    srv = ServerProcess(
        [
            "--model-config-file",
            str(config),
            "--no-warmup",
            "--max-rows",
            "64",
            "--max-sentence-tokens",
            "200",
            "--max-body-bytes",
            str(64 * 1024),
            "--read-timeout",
            "2",
            "--max-connections",
            "40",
            "--poll-seconds",
            "0",
        ]
    )
    yield srv
    srv.stop()
