"""TF Serving's model config file (``--model_config_file``), one model.

A text-format ``tensorflow.serving.ModelServerConfig`` as TF Serving reads
it, with one ``model_config_list.config`` entry::

    model_config_list {
      config {
        name: "ptb_lm"
        base_path: "/models/ptb_lm"
        model_platform: "tensorflow"
        model_version_policy { specific { versions: 1 versions: 2 } }
        version_labels { key: "stable" value: 1 }
        version_labels { key: "canary" value: 2 }
      }
    }

``model_version_policy``: ``latest { num_versions: N }`` (default N = 1),
``all {}`` or ``specific { versions: ... }``. A relative ``base_path`` is
taken from the config file's directory.
"""

import dataclasses
import os

from keras_rnnlm.serving.servables import VersionPolicy


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """What the server takes from a model config file."""

    name: str
    base_path: str
    policy: VersionPolicy
    labels: dict


def read_model_config(path):
    """Parses ``path``; raises ValueError naming what is wrong."""
    from google.protobuf import text_format  # protobuf: loaded on use
    from tensorflow_serving.config import model_server_config_pb2

    with open(path, encoding="utf-8") as f:
        text = f.read()
    config = model_server_config_pb2.ModelServerConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as e:
        raise ValueError(f"{path}: not a ModelServerConfig: {e}") from None
    if config.WhichOneof("config") != "model_config_list":
        raise ValueError(f"{path}: needs a model_config_list")
    models = config.model_config_list.config
    if len(models) != 1:
        raise ValueError(
            f"{path}: keras-rnnlm serve serves one model; the config lists "
            f"{len(models)}"
        )
    (model,) = models
    if not model.name or not model.base_path:
        raise ValueError(f"{path}: the model needs a name and a base_path")
    if model.model_platform not in ("", "tensorflow"):
        raise ValueError(
            f"{path}: model_platform {model.model_platform!r}: only "
            "'tensorflow' SavedModels are served"
        )
    base = model.base_path
    if not os.path.isabs(base):
        base = os.path.join(os.path.dirname(os.path.abspath(path)), base)
    try:
        policy = VersionPolicy.from_proto(model.model_version_policy)
    except ValueError as e:
        raise ValueError(f"{path}: model_version_policy: {e}") from None
    labels = dict(model.version_labels)
    if policy.kind == "specific":
        missing = sorted(set(labels.values()) - policy.versions)
        if missing:
            raise ValueError(
                f"{path}: version_labels name versions {missing} that the "
                f"policy {policy!r} does not serve"
            )
    return ModelConfig(model.name, base, policy, labels)
