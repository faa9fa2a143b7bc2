"""Load benchmark of ``keras-rnnlm serve``: REST and gRPC, with and
without server-side batching, against the in-process batched ceiling.

    python -m bench.serving [--size medium] [--clients 1 32]
        [--duration 20] [--apis rest grpc] [--soak 0] [--threads 1]
        [--batching both|on|off]

An untrained Zaremba-sized model (PTB's 10k words; ``--size medium``: 650
units, 2 layers) is exported (the default, non-XLA export) and served by
``keras-rnnlm serve`` in a child process on loopback ports. N client
threads (``--clients``) send one PTB test sentence per request, in corpus
order, for ``--duration`` seconds per phase (bounded in count and time;
loopback only). Each phase reports throughput (sentences/s, tokens/s),
p50/p95/p99 latency, errors and the server's peak RSS; the ceiling is the
same export called in this process on batches of 32 sentences in corpus
order. ``--soak S`` adds one batched REST phase of S seconds at the
largest client count and reports the server's RSS at its start and end.
Records go to ``bench/results/serving.jsonl``.
"""

import http.client
import json
import os
import re
import statistics
import subprocess
import tempfile
import threading
import time

from bench.harness.options import add_output_arguments
from bench.harness.options import add_threads_argument
from bench.harness.options import bench_parser
from bench.harness.processes import cli_command
from bench.harness.processes import thread_env
from bench.harness.records import record
from bench.harness.records import record_fields
from bench.harness.records import write_records

SIZES = {"small": 200, "medium": 650, "large": 1500}
MODULE = "bench.serving"
MAX_CLIENTS = 64
MAX_SECONDS = 600


def ptb_sentences(n):
    from keras_rnnlm.data import resolve_corpus_files

    files = resolve_corpus_files("ptb", download=False)
    with open(files["test"], encoding="utf-8") as f:
        lines = [line.strip() for line in f]
    return [s for s in lines if s][:n]


def export(size, base):
    from keras_rnnlm.config import ModelConfig
    from keras_rnnlm.data import load_corpus
    from keras_rnnlm.export import export_saved_model
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.scoring import Scorer

    vocab = load_corpus("ptb", download=False).vocab
    hidden = SIZES[size]
    cfg = ModelConfig(embedding_dim=hidden, hidden_sizes=[hidden, hidden])
    model = build_language_model(cfg, len(vocab), None, stateful=False, seed=0)
    export_saved_model(Scorer(model, vocab), os.path.join(base, "1"))


def in_process_rate(base, sentences, seconds):
    """Sentences/s of the export called on batches of 32, corpus order."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    fn = tf.saved_model.load(os.path.join(base, "1")).signatures["score_text"]
    batches = [sentences[i : i + 32] for i in range(0, len(sentences), 32)]
    for b in batches:
        fn(sentences=tf.constant(b))  # warm-up
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for b in batches:
            fn(sentences=tf.constant(b))
            done += len(b)
    return done / (time.perf_counter() - t0)


def vm_hwm_mb(pid, field="VmHWM"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    return None


def start_server(base, batching, env):
    cmd = cli_command(
        "serve",
        base,
        "--model-name",
        "lm",
        "--rest-port",
        "0",
        "--grpc-port",
        "0",
        "--access-log",
        os.devnull,
        "--max-enqueued",
        "1024",
    )
    if not batching:
        cmd.append("--no-batching")
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 300
    for line in proc.stderr:
        m = re.search(r"REST on [\d.]+:(\d+), gRPC on [\d.]+:(\d+)", line)
        if m:
            threading.Thread(
                target=lambda: proc.stderr.read(), daemon=True
            ).start()
            return proc, int(m[1]), int(m[2])
        if time.monotonic() > deadline:
            break
    proc.kill()
    raise RuntimeError("the server did not start")


def rest_client(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def call(sentence):
        body = json.dumps({"instances": [sentence]})
        conn.request("POST", "/v1/models/lm:predict", body)
        r = conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise RuntimeError(data[:200])

    return call


def grpc_client(port):
    import grpc
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)

    def call(sentence):
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "lm"
        request.model_spec.signature_name = "score_text"
        request.inputs["sentences"].CopyFrom(
            tf.make_tensor_proto([sentence], dtype=tf.string)
        )
        stub.Predict(request, timeout=60)

    return call


def load_phase(make_client, port, clients, seconds, sentences):
    """N client threads for ``seconds``: (sentences done, tokens done,
    latencies in ms, errors)."""
    lock = threading.Lock()
    state = {"next": 0, "done": 0, "tokens": 0, "errors": 0}
    latencies = []
    stop = time.monotonic() + seconds

    def worker():
        call = make_client(port)
        while time.monotonic() < stop:
            with lock:
                i = state["next"] % len(sentences)
                state["next"] += 1
            s = sentences[i]
            t0 = time.perf_counter()
            try:
                call(s)
            except Exception:  # noqa: BLE001  (counted, not raised)
                with lock:
                    state["errors"] += 1
                continue
            ms = (time.perf_counter() - t0) * 1000
            with lock:
                latencies.append(ms)
                state["done"] += 1
                state["tokens"] += len(s.split()) + 1

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 120)
    return state["done"], state["tokens"], latencies, state["errors"]


def pct(values, q):
    """The ``q``-th percentile of ``values`` (None when empty)."""
    if len(values) < 2:
        return values[0] if values else None
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def parser():
    p = bench_parser(MODULE, __doc__)
    p.add_argument("--size", choices=sorted(SIZES), default="medium")
    p.add_argument("--sentences", type=int, default=1024)
    p.add_argument("--clients", type=int, nargs="+", default=[1, 32])
    p.add_argument("--duration", type=float, default=20.0)
    p.add_argument("--apis", nargs="+", default=["rest", "grpc"])
    p.add_argument("--soak", type=float, default=0.0)
    p.add_argument(
        "--batching",
        choices=["both", "on", "off"],
        default="both",
        help="server-side batching of the phases (default: both)",
    )
    add_threads_argument(p, 1)
    add_output_arguments(p, "serving.jsonl")
    return p


def phase_record(args, api, n, batching, ceiling, proc, result):
    """The record of one load phase (``result``: :func:`load_phase`'s)."""
    done, toks, lat, errors = result
    rate = done / args.duration
    rec = record(
        "throughput",
        f"serving_{api}_c{n}_" + ("batching" if batching else "no_batching"),
        "keras_rnnlm_serve",
        rate,
        "sentences/s",
        reference=ceiling,
        reference_name="in-process batch 32",
        api=api,
        clients=n,
        batching=batching,
        tokens_per_s=round(toks / args.duration, 1),
        p50_ms=round(pct(lat, 50) or 0, 2),
        p95_ms=round(pct(lat, 95) or 0, 2),
        p99_ms=round(pct(lat, 99) or 0, 2),
        errors=errors,
        server_peak_rss_mb=round(vm_hwm_mb(proc.pid), 1),
    )
    print(json.dumps(rec), flush=True)
    return rec


def soak_record(args, ceiling, proc, rest_port, sentences):
    """One batched REST phase of ``--soak`` seconds at the largest client
    count, with the server's RSS at its start and end."""
    n = max(args.clients)
    rss0 = vm_hwm_mb(proc.pid, "VmRSS")
    done, toks, lat, errors = load_phase(
        rest_client, rest_port, n, args.soak, sentences
    )
    rec = record(
        "throughput",
        f"serving_rest_c{n}_soak",
        "keras_rnnlm_serve",
        done / args.soak,
        "sentences/s",
        reference=ceiling,
        reference_name="in-process batch 32",
        clients=n,
        soak_s=args.soak,
        rss_start_mb=round(rss0, 1),
        rss_end_mb=round(vm_hwm_mb(proc.pid, "VmRSS"), 1),
        p50_ms=round(pct(lat, 50) or 0, 2),
        p99_ms=round(pct(lat, 99) or 0, 2),
        errors=errors,
    )
    print(json.dumps(rec), flush=True)
    return rec


def server_records(args, base, batching, env, ceiling, sentences):
    """Starts one server (with or without batching) and runs its phases."""
    proc, rest_port, grpc_port = start_server(base, batching, env)
    records = []
    try:
        for api in args.apis:
            make = rest_client if api == "rest" else grpc_client
            port = rest_port if api == "rest" else grpc_port
            for n in args.clients:
                result = load_phase(make, port, n, args.duration, sentences)
                records.append(
                    phase_record(args, api, n, batching, ceiling, proc, result)
                )
        if batching and args.soak > 0:
            records.append(
                soak_record(args, ceiling, proc, rest_port, sentences)
            )
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
    return records


def main(argv=None):
    p = parser()
    args = p.parse_args(argv)
    if max(args.clients) > MAX_CLIENTS or args.duration > MAX_SECONDS:
        p.error(f"at most {MAX_CLIENTS} clients and {MAX_SECONDS} s a phase")
    env = thread_env(args.threads, TF_CPP_MIN_LOG_LEVEL="3")
    for k in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"):
        if k in env:
            os.environ[k] = env[k]
    sentences = ptb_sentences(args.sentences)
    per_sentence = sum(len(s.split()) + 1 for s in sentences) / len(sentences)
    fields = record_fields(
        MODULE,
        argv,
        threads=args.threads,
        model_desc=f"zaremba {args.size}, random weights, default export",
        sentences=len(sentences),
        duration_s=args.duration,
    )
    with tempfile.TemporaryDirectory(prefix="bench_serving_") as tmp:
        base = os.path.join(tmp, "lm")
        export(args.size, base)
        ceiling = in_process_rate(base, sentences, args.duration)
        print(f"in-process batched: {ceiling:.1f} sentences/s", flush=True)
        records = [
            record(
                "throughput",
                "serving_in_process_batch32",
                "saved_model",
                ceiling,
                "sentences/s",
                tokens_per_s=round(ceiling * per_sentence, 1),
            )
        ]
        modes = {"both": (True, False), "on": (True,), "off": (False,)}
        for batching in modes[args.batching]:
            records += server_records(
                args, base, batching, env, ceiling, sentences
            )
    write_records(args, records, fields)


if __name__ == "__main__":
    main()
