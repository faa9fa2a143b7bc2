"""``keras-rnnlm serve`` and the export's ``generate`` signature: the
same seed gives the same text from the Python object, the command line,
the export and the server (REST in both formats, gRPC with the official
stubs); the documented requests run; a bad value is HTTP 400 / gRPC
INVALID_ARGUMENT naming the input, never a crash; requests are never
merged into a batch."""

import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from serving_client import ENV
from serving_client import grpc_predict
from serving_client import http
from serving_client import rest_url

from keras_rnnlm import LanguageModel
from keras_rnnlm.generation import TopPSampler

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
DOC = os.path.join(ROOT, "docs", "generation.md")
REQUEST = os.path.join(ROOT, "export", "examples", "generate_request.json")
GRPC_CLIENT = os.path.join(ROOT, "export", "examples", "grpc_generate.py")
#: the documented request's arguments
PROMPTS = ["the cat", "a dog likes"]
GOOD = {
    "prompts": PROMPTS,
    "max_tokens": 12,
    "sampler": "top_p",
    "temperature": 0.8,
    "top_k": 0,
    "top_p": 0.9,
    "seed": 7,
    "num_samples": 2,
    "stop_token": "<eos>",
}
DTYPES = {
    "max_tokens": np.int32,
    "temperature": np.float32,
    "top_k": np.int32,
    "top_p": np.float32,
    "seed": np.int64,
    "num_samples": np.int32,
}


def _python_texts(lm, **changes):
    args = {**GOOD, **changes}
    sampler = TopPSampler(args["top_p"], temperature=args["temperature"])
    out = lm.generate(
        args["prompts"],
        args["max_tokens"],
        sampler,
        seed=args["seed"],
        stop_token=args["stop_token"],
        num_samples=args["num_samples"],
    )
    return [t for samples in out for t in samples]


def _predict(server, body):
    return http("POST", rest_url(server, ":predict"), body)


def _columnar(**changes):
    return {"signature_name": "generate", "inputs": {**GOOD, **changes}}


def _rows(**changes):
    args = {**GOOD, **changes}
    return {
        "signature_name": "generate",
        "instances": [
            {**args, "prompts": p} for p in args["prompts"]
        ],  # the parameters repeated in every row
    }


def _grpc_inputs(**changes):
    args = {**GOOD, **changes}
    out = {}
    for name, value in args.items():
        if name in DTYPES:
            out[name] = np.asarray(value, DTYPES[name])
        else:
            out[name] = np.asarray(value, object)
    return out


def _doc_blocks():
    """The documented requests: each indented block of docs/generation.md
    that starts with the generate signature's name."""
    with open(DOC) as f:
        text = f.read()
    blocks = re.findall(
        r'\n((?:    \{"signature_name": "generate",\n)(?:    .*\n)+)', text
    )
    return [json.loads(textwrap.dedent(b)) for b in blocks], text


@pytest.fixture(scope="module")
def texts(tiny_run):
    """The Python object's continuations of the documented request."""
    return _python_texts(LanguageModel.from_run(tiny_run))


@pytest.mark.slow
def test_same_seed_same_text_everywhere(server, served_base, texts, capsys):
    from keras_rnnlm.cli import main
    from keras_rnnlm.cli.scoring import escape_tsv_field

    export = os.path.join(served_base[1], "1")
    assert _python_texts(LanguageModel.from_export(export)) == texts
    assert len(set(texts)) > 1  # samples differ
    # the command line, as documented
    _, doc = _doc_blocks()
    (command,) = re.findall(r"`(keras-rnnlm generate models/[^`]*)`", doc)
    argv = shlex.split(command)
    assert argv[:3] == ["keras-rnnlm", "generate", "models/ptb_lm/1"]
    assert main(["generate", export, *argv[3:]]) == 0
    assert capsys.readouterr().out.splitlines() == [
        escape_tsv_field(t) for t in texts
    ]
    # REST, columnar and row formats
    status, out = _predict(server, _columnar())
    assert status == 200, out
    assert out["outputs"]["text"] == texts
    assert out["outputs"]["prompt_index"] == [0, 0, 1, 1]
    status, out = _predict(server, _rows())
    assert status == 200, out
    assert [p["text"] for p in out["predictions"]] == texts
    # gRPC with tensorflow-serving-api's stubs
    out = grpc_predict(server, "generate", _grpc_inputs())
    assert [t.decode() for t in out["text"]] == texts
    # another seed, another text
    status, out = _predict(server, _columnar(seed=8))
    assert status == 200 and out["outputs"]["text"] != texts


def test_the_documented_requests(server, texts):
    (columnar, rows), doc = _doc_blocks()
    with open(REQUEST) as f:
        assert json.load(f) == columnar == _columnar()
    assert rows == _rows()
    assert "-d @export/examples/generate_request.json" in doc
    status, out = _predict(server, columnar)
    assert status == 200 and out["outputs"]["text"] == texts
    status, out = _predict(server, rows)
    assert status == 200
    assert [p["text"] for p in out["predictions"]] == texts
    # the gRPC client example, with the documented arguments
    (command,) = re.findall(
        r"python export/examples/grpc_generate.py (.*?)\n\n", doc, re.S
    )
    args = shlex.split(command.replace("\\\n", " "))
    args[args.index("--server") + 1] = f"127.0.0.1:{server.grpc_port}"
    args[args.index("--model") + 1] = "tiny_lm"
    proc = subprocess.run(
        [sys.executable, GRPC_CLIENT, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=ENV,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["text"] for r in rows] == texts
    assert [r["prompt"] for r in rows] == [p for p in PROMPTS for _ in "ab"]


def test_edge_values_answer_as_python(server, tiny_run):
    lm = LanguageModel.from_run(tiny_run)
    # max_tokens 0: empty continuations
    status, out = _predict(server, _columnar(max_tokens=0))
    assert status == 200, out
    assert out["outputs"]["text"] == [""] * 4
    assert out["outputs"]["tokens"] == [[]] * 4
    # an empty prompt starts a sentence; an OOV word is <unk>
    prompts = ["", "zebra zebra the"]
    status, out = _predict(server, _columnar(prompts=prompts))
    assert status == 200, out
    assert out["outputs"]["text"] == _python_texts(lm, prompts=prompts)
    # max_tokens one per prompt (the row format's): each row cut there
    body = _rows()
    body["instances"][0]["max_tokens"] = 3
    status, out = _predict(server, body)
    assert status == 200, out
    got = [p["text"] for p in out["predictions"]]
    assert max(p["lengths"] for p in out["predictions"][:2]) <= 3
    full = _python_texts(lm)
    assert got[2:] == full[2:]
    assert all(f.startswith(g) for f, g in zip(full[:2], got[:2]))
    assert got[:2] == _python_texts(lm, max_tokens=3)[:2]


#: (changes to the documented request, a fragment of the error)
BAD = [
    ({"max_tokens": -1}, "max_tokens: must be an integer in 0..4096"),
    ({"max_tokens": 5000}, "(--max-sentence-tokens)"),  # the server first
    ({"max_tokens": [3, 4, 5]}, "max_tokens: must be a scalar or one"),
    ({"temperature": 0.0}, "temperature: must be a finite number > 0"),
    ({"temperature": -2.0}, "temperature: must be a finite number > 0"),
    ({"top_p": 0.0}, "top_p: must be a number in (0, 1)"),
    ({"top_p": 1.5}, "top_p: must be a number in (0, 1)"),
    ({"top_k": 100000}, "top_k: must be 0 (none) or an integer in 1.."),
    ({"top_k": -1}, "top_k: must be 0 (none) or an integer in 1.."),
    ({"sampler": "top_k"}, "top_k: must be >= 1 for the top_k sampler"),
    ({"sampler": "random", "top_k": 3}, "top_k: applies to the top_k"),
    ({"sampler": "greedy"}, "top_p: applies to the top_p sampler only"),
    ({"sampler": "beam"}, "sampler: must be one of greedy, random"),
    ({"seed": -1}, "seed: must be an integer in 0..2147483647"),
    ({"seed": 2**31}, "seed: must be an integer in 0..2147483647"),
    ({"num_samples": 0}, "num_samples: must be an integer in 1.."),
    ({"stop_token": "zebra"}, "stop_token: must be a token of the"),
    ({"temperature": [0.8, 0.9]}, "temperature: must be the same in every"),
    ({"prompts": []}, "empty batch"),
    ({"prompts": "the cat"}, "must have rank 1"),
    ({"top_k": "three"}, "expected int values"),
    ({"max_tokens": 190, "num_samples": 2, "prompts": ["the"] * 30},
     "over the token budget of the export"),
    ({"num_samples": 40}, "too many continuations"),
    ({"max_tokens": 199}, "(--max-sentence-tokens)"),
    ({"seed": list(range(65))}, "(--max-rows)"),
]  # fmt: skip


@pytest.mark.parametrize("changes, message", BAD)
def test_bad_values_are_400_and_invalid_argument(server, changes, message):
    import grpc

    status, out = _predict(server, _columnar(**changes))
    assert status == 400, out
    assert set(out) == {"error"} and message in out["error"], out
    if changes.get("top_k") == "three" or changes.get("prompts") == []:
        return  # not a tensor the stubs make / an empty string batch
    with pytest.raises(grpc.RpcError) as e:
        grpc_predict(server, "generate", _grpc_inputs(**changes))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert message in e.value.details()


def test_row_format_parameters_must_agree(server):
    body = _rows()
    body["instances"][1]["seed"] = 8
    status, out = _predict(server, body)
    assert status == 400
    assert "seed: must be the same in every row" in out["error"]
    body = _rows()
    del body["instances"][1]["top_k"]
    status, out = _predict(server, body)
    assert status == 400 and "same keys" in out["error"]


def test_a_huge_declared_parameter_is_refused_before_it_is_read(server):
    """A gRPC tensor of one value declaring a billion elements: refused
    on its declared shape, never expanded."""
    import grpc
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    request = predict_pb2.PredictRequest()
    request.model_spec.name = "tiny_lm"
    request.model_spec.signature_name = "generate"
    for name, value in _grpc_inputs().items():
        request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
    temperature = request.inputs["temperature"]
    temperature.tensor_shape.dim.add().size = 10**9
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        with pytest.raises(grpc.RpcError) as e:
            stub.Predict(request, timeout=60)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "(--max-rows)" in e.value.details()


def test_requests_are_never_merged(server, texts):
    """Concurrent requests (other seeds and samplers, and the same one)
    are each one call of their own, answered as alone."""
    servable = server.models.servable()
    assert servable.signatures["generate"].batched is False
    bodies = [_columnar(seed=s) for s in (7, 8, 9)] + [
        _columnar(sampler="random", top_p=1.0),
        _columnar(sampler="greedy", top_p=1.0, num_samples=1),
        _columnar(),
    ]
    alone = [_predict(server, b)[1]["outputs"]["text"] for b in bodies]
    assert alone[0] == alone[-1] == texts
    before = dict(server.engine.stats)
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        results = list(pool.map(lambda b: _predict(server, b), bodies * 2))
    assert [r[1]["outputs"]["text"] for r in results] == alone * 2
    stats = server.engine.stats
    assert stats["direct_calls"] - before.get("direct_calls", 0) == 12
    assert stats["batches"] == before.get("batches", 0)


def test_metadata_lists_the_signature(server):
    status, out = http("GET", rest_url(server, "/metadata"))
    assert status == 200
    sig = out["metadata"]["signature_def"]["signature_def"]["generate"]
    assert set(sig["inputs"]) == set(GOOD)
    assert sig["inputs"]["seed"]["tensor_shape"] == {"unknown_rank": True}
    assert set(sig["outputs"]) == {
        "text", "tokens", "token_ids", "token_logprobs", "lengths",
        "stopped", "prompt_index",
    }  # fmt: skip
