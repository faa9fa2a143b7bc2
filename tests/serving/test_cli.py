"""``keras-rnnlm serve`` as a process (SIGTERM drains), and the documented
curl and gRPC client examples."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest
from serving_client import http

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
REQUEST = os.path.join(ROOT, "export", "examples", "score_text_request.json")
GRPC_CLIENT = os.path.join(ROOT, "export", "examples", "grpc_client.py")
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "GRPC_VERBOSITY": "ERROR"}


@pytest.mark.skipif(shutil.which("curl") is None, reason="no curl")
def test_documented_curl_example(server):
    url = f"http://localhost:{server.rest_port}/v1/models/tiny_lm:predict"
    proc = subprocess.run(
        ["curl", "-s", "-X", "POST", url, "-d", f"@{REQUEST}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert [p["num_tokens"] for p in out["predictions"]] == [7, 7, 1]


@pytest.mark.slow
def test_documented_grpc_client_example(server):
    proc = subprocess.run(
        [
            sys.executable,
            GRPC_CLIENT,
            "--server",
            f"127.0.0.1:{server.grpc_port}",
            "--model",
            "tiny_lm",
            "the cat sees a ball .",
            "zebra",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=ENV,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [json.loads(x) for x in proc.stdout.splitlines()]
    assert [(r["num_tokens"], r["num_oov"]) for r in rows] == [(7, 0), (2, 1)]


def test_serve_needs_a_base_dir(tmp_path, capsys):
    from keras_rnnlm.cli import main

    missing = str(tmp_path / "none")
    assert main(["serve", missing, "--model-name", "x"]) == 2
    assert f"No such file or directory: {missing}" in capsys.readouterr().err


@pytest.mark.slow
def test_serve_process_drains_on_sigterm(served_base, tmp_path):
    """A request waiting in a batch when SIGTERM arrives is answered, and
    the process exits 0 (bounded: the server is killed after 120 s)."""
    access = tmp_path / "access.log"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "keras_rnnlm.cli",
            "serve",
            served_base[1],
            "--model-name",
            "tiny_lm",
            "--rest-port",
            "0",
            "--grpc-port",
            "0",
            "--batch-timeout-micros",
            "1500000",
            "--access-log",
            str(access),
        ],
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    killer = threading.Timer(120, proc.kill)
    killer.start()
    try:
        ports = None
        lines = []
        for line in proc.stderr:
            lines.append(line)
            m = re.search(r"REST on [\d.]+:(\d+), gRPC on [\d.]+:(\d+)", line)
            if m:
                ports = int(m[1]), int(m[2])
                break
        assert ports, "".join(lines)[-3000:]
        url = f"http://127.0.0.1:{ports[0]}/v1/models/tiny_lm:predict"
        answers = []
        client = threading.Thread(
            target=lambda: answers.append(
                http("POST", url, {"instances": ["the cat"]})
            )
        )
        client.start()
        time.sleep(0.5)  # the request waits for its batch (1.5 s)
        proc.send_signal(signal.SIGTERM)
        client.join(60)
        rest = proc.stderr.read()
        assert proc.wait(60) == 0, rest[-3000:]
    finally:
        killer.cancel()
        if proc.poll() is None:
            proc.kill()
    assert answers and answers[0][0] == 200, answers
    assert answers[0][1]["predictions"][0]["num_tokens"] == 3
    assert "draining" in rest
    assert "POST /v1/models/tiny_lm" in access.read_text()
