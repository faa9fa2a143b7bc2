"""Batching merges concurrent requests without changing any answer, and a
new version is swapped in under load without losing a request."""

import concurrent.futures
import os
import shutil
import threading
import time

import numpy as np
import pytest
from serving_client import copy_base
from serving_client import grpc_predict
from serving_client import http
from serving_client import polling_server
from serving_client import wait_until

SENTENCES = [
    "the cat sees a ball .",
    "a dog likes some food .",
    "my friend eats the fish . the bird finds a ball",
    "",
    "zebra",
    "the bird",
]


def _score(url, sentences):
    status, out = http("POST", url, {"instances": sentences})
    assert status == 200, out
    return out["predictions"]


def test_concurrent_equals_single_threaded(server):
    url = f"http://127.0.0.1:{server.rest_port}/v1/models/tiny_lm:predict"
    requests = [SENTENCES[i % 6 : i % 6 + 1 + i % 3] for i in range(48)]
    single = [_score(url, r) for r in requests]
    before = dict(server.engine.stats)
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        merged = list(pool.map(lambda r: _score(url, r), requests))
    stats = server.engine.stats
    batches = stats["batches"] - before.get("batches", 0)
    merged_requests = stats["batched_requests"] - before.get(
        "batched_requests", 0
    )
    assert merged_requests == len(requests)
    assert batches < len(requests)  # some requests shared a call
    for a, b in zip(single, merged, strict=True):
        for x, y in zip(a, b, strict=True):
            assert x["tokens"] == y["tokens"]
            assert x["lengths"] == y["lengths"]
            np.testing.assert_allclose(
                x["token_logprobs"], y["token_logprobs"], atol=1e-5
            )
    # gRPC requests are merged the same way.
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        outs = list(
            pool.map(
                lambda s: grpc_predict(
                    server,
                    "score_text",
                    {"sentences": np.array([s.encode()], object)},
                ),
                SENTENCES * 2,
            )
        )
    for s, out in zip(SENTENCES * 2, outs):
        ref = _score(url, [s])[0]
        np.testing.assert_allclose(
            out["token_logprobs"][0], ref["token_logprobs"], atol=1e-5
        )


def test_concurrent_steps_of_different_lengths(server):
    """``step`` requests are merged only with requests of their own
    length: a padded row would carry its state past its end."""
    state = grpc_predict(
        server, "initial_state", {"batch_size": np.array(1, np.int32)}
    )
    bos = int(state.pop("bos_ids")[0])
    feeds = [[bos, 3, 4, 5][: 1 + i % 4] for i in range(16)]

    def step(feed):
        inputs = {"token_ids": np.array([feed], np.int32), **state}
        return grpc_predict(server, "step", inputs)

    single = [step(f) for f in feeds]
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        merged = list(pool.map(step, feeds))
    for a, b in zip(single, merged):
        for k in a:
            np.testing.assert_allclose(a[k], b[k], atol=1e-5)


@pytest.mark.slow
def test_version_swap_under_load_loses_nothing(served_base, tmp_path):
    base = copy_base(served_base, tmp_path)
    stop = threading.Event()
    results, errors = [], []
    # No warm-up: faster loads (warm-up is exercised elsewhere).
    with polling_server(base, warm_up=False) as srv:
        url = f"http://127.0.0.1:{srv.rest_port}/v1/models/tiny_lm:predict"

        def client():
            while not stop.is_set():
                try:
                    status, out = http("POST", url, {"instances": SENTENCES})
                    (results if status == 200 else errors).append(out)
                except Exception as e:  # noqa: BLE001  (a lost request)
                    errors.append(repr(e))

        threads = [threading.Thread(target=client) for _ in range(4)]
        try:
            for t in threads:
                t.start()
            # A new version, written aside then renamed in (atomic).
            shutil.copytree(os.path.join(base, "1"), tmp_path / "v2")
            os.rename(tmp_path / "v2", os.path.join(base, "2"))
            wait_until(lambda: srv.models.servable().version == 2, srv)
            # A broken version: reported, the served one stays.
            os.makedirs(os.path.join(base, "3"))
            with open(os.path.join(base, "3", "saved_model.pb"), "wb") as f:
                f.write(b"not a SavedModel")
            wait_until(
                lambda: any(
                    v == 3 and s == "END" for v, s, *_ in srv.models.status()
                ),
                srv,
            )
            time.sleep(0.5)
        finally:
            stop.set()
            for t in threads:
                t.join(60)
    assert errors == [] and len(results) > 4
    status = {v: (s, code, m) for v, s, code, m in srv.models.status()}
    assert status[2] == ("AVAILABLE", "OK", "")
    assert status[1][0] == "END"
    assert status[3][0] == "END" and status[3][1] != "OK" and status[3][2]
    assert srv.models.servable().version == 2
