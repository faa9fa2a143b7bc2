"""Scores sentences over gRPC, as a TF Serving client does.

    python export/examples/grpc_client.py --server 127.0.0.1:8500 \
        --model ptb_lm "the cat sat ." "a dog barked ."

Works unchanged against ``keras-rnnlm serve`` and ``tensorflow_model_server``.
Needs ``tensorflow-serving-api`` (its stubs and protos) and ``grpcio``;
prints one JSON object per sentence.
"""

import argparse
import json

import grpc
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_service_pb2_grpc


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("sentences", nargs="+")
    parser.add_argument("--server", default="127.0.0.1:8500")
    parser.add_argument("--model", required=True)
    parser.add_argument("--signature", default="score_text")
    args = parser.parse_args()
    with grpc.insecure_channel(args.server) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        request = predict_pb2.PredictRequest()
        request.model_spec.name = args.model
        request.model_spec.signature_name = args.signature
        request.inputs["sentences"].CopyFrom(
            tf.make_tensor_proto(args.sentences, dtype=tf.string)
        )
        response = stub.Predict(request, timeout=30)
    out = {k: tf.make_ndarray(v) for k, v in response.outputs.items()}
    for i, sentence in enumerate(args.sentences):
        print(
            json.dumps(
                {
                    "sentence": sentence,
                    "log10_prob": float(out["log10_prob"][i]),
                    "num_tokens": int(out["num_tokens"][i]),
                    "num_oov": int(out["num_oov"][i]),
                }
            )
        )


if __name__ == "__main__":
    main()
