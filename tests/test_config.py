import pytest

from keras_rnnlm.config import ConfigError
from keras_rnnlm.config import RunConfig
from keras_rnnlm.config import apply_overrides


def test_overrides_parse_json_values():
    cfg = apply_overrides(
        RunConfig(),
        [
            "model.hidden_sizes=[300, 300]",
            "train.learning_rate=0.5",
            "data.max_tokens=null",
            "train.lr_schedule.decay=0.25",
            "name=exp1",
        ],
    )
    assert cfg.model.hidden_sizes == [300, 300]
    assert cfg.train.learning_rate == 0.5
    assert cfg.data.max_tokens is None
    assert cfg.train.lr_schedule["decay"] == 0.25
    assert cfg.name == "exp1"


@pytest.mark.parametrize(
    "override, match",
    [
        ("model.hiden_sizes=[1]", "hiden_sizes"),
        ("modle.dropout=0.1", "modle"),
        ("dropout=0.1", "section.key"),
        ("model.dropout", "section.key=value"),
    ],
)
def test_unknown_keys_rejected(override, match):
    with pytest.raises(ConfigError, match=match):
        apply_overrides(RunConfig(), [override])


def test_from_dict_rejects_unknown_and_round_trips():
    with pytest.raises(ConfigError, match="typo"):
        RunConfig.from_dict({"train": {"typo": 1}})
    cfg = RunConfig()
    assert RunConfig.from_dict(cfg.to_dict()) == cfg
