"""Continues prompts over gRPC (the export's ``generate`` signature), as
a TF Serving client does.

    python export/examples/grpc_generate.py --server 127.0.0.1:8500 \
        --model ptb_lm --max-tokens 12 --sampler top_p --top-p 0.9 \
        --seed 7 "the cat" "a dog likes"

Works unchanged against ``keras-rnnlm serve`` and ``tensorflow_model_server``.
Needs ``tensorflow-serving-api`` (its stubs and protos) and ``grpcio``;
prints one JSON object per continuation, prompt by prompt and each
prompt's samples in order. Every input of the signature is sent (TF
Serving requires them all); the ones a sampler does not use keep their
neutral values (``top_k`` 0, ``top_p`` 1).
"""

import argparse
import json

import grpc
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_service_pb2_grpc


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("prompts", nargs="+")
    parser.add_argument("--server", default="127.0.0.1:8500")
    parser.add_argument("--model", required=True)
    parser.add_argument("--max-tokens", type=int, default=20)
    parser.add_argument("--sampler", default="greedy")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-k", type=int, default=0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-samples", type=int, default=1)
    parser.add_argument("--stop-token", default="<eos>")
    args = parser.parse_args()
    inputs = {
        "prompts": tf.make_tensor_proto(args.prompts, dtype=tf.string),
        "max_tokens": tf.make_tensor_proto(args.max_tokens, dtype=tf.int32),
        "sampler": tf.make_tensor_proto(args.sampler, dtype=tf.string),
        "temperature": tf.make_tensor_proto(args.temperature, tf.float32),
        "top_k": tf.make_tensor_proto(args.top_k, dtype=tf.int32),
        "top_p": tf.make_tensor_proto(args.top_p, dtype=tf.float32),
        "seed": tf.make_tensor_proto(args.seed, dtype=tf.int64),
        "num_samples": tf.make_tensor_proto(args.num_samples, tf.int32),
        "stop_token": tf.make_tensor_proto(args.stop_token, tf.string),
    }
    with grpc.insecure_channel(args.server) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        request = predict_pb2.PredictRequest()
        request.model_spec.name = args.model
        request.model_spec.signature_name = "generate"
        for name, proto in inputs.items():
            request.inputs[name].CopyFrom(proto)
        response = stub.Predict(request, timeout=60)
    out = {k: tf.make_ndarray(v) for k, v in response.outputs.items()}
    for row, n in enumerate(out["lengths"]):
        index = int(out["prompt_index"][row])
        tokens = out["tokens"][row, :n]
        print(
            json.dumps(
                {
                    "prompt": args.prompts[index],
                    "text": out["text"][row].decode("utf-8"),
                    "tokens": [t.decode("utf-8") for t in tokens],
                    "finish_reason": (
                        "stop" if out["stopped"][row] else "length"
                    ),
                }
            )
        )


if __name__ == "__main__":
    main()
