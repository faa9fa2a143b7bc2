import json
import os

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from keras_rnnlm.config import FIELD_CHECKS
from keras_rnnlm.config import ConfigError
from keras_rnnlm.config import RunConfig
from keras_rnnlm.config import TrainConfig
from keras_rnnlm.config import apply_overrides
from keras_rnnlm.config import load_config


def test_overrides_parse_json_values():
    cfg = apply_overrides(
        RunConfig(),
        [
            "model.hidden_sizes=[300, 300]",
            "train.learning_rate=0.5",
            "data.max_tokens=null",
            'train.lr_schedule.name="zaremba"',
            "train.lr_schedule.decay=0.25",
            "train.lr_schedule.start_epoch=4",
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


# Each of these is refused when the override is applied, with a message that
# names the field (not later in training with a raw exception).
@pytest.mark.parametrize(
    "override, expects",
    [
        ("train.epochs=abc", "train.epochs must be an int >= 1, got 'abc'"),
        ("train.epochs=2.5", "train.epochs must be an int >= 1, got 2.5"),
        ("train.epochs=-1", "train.epochs must be an int >= 1, got -1"),
        ("train.epochs=true", "train.epochs must be an int >= 1, got True"),
        ("model.hidden_sizes=32", "model.hidden_sizes must be a non-empty"),
        ("model.hidden_sizes=[32, 0]", "model.hidden_sizes must be"),
        ('train.learning_rate="fast"', "train.learning_rate must be a number"),
        ("train.learning_rate=NaN", "train.learning_rate must be a number"),
        ("train.learning_rate=-1", "train.learning_rate must be a number >= 0"),
        ("model.dropout=1.5", "model.dropout must be a number in [0, 1)"),
        ("data.batch_size=0", "data.batch_size must be an int >= 1"),
        ("data.level=words", "data.level must be null or one of"),
        ("train.optimizer=adagrad", "train.optimizer must be one of"),
        ("train.seed=-3", "train.seed must be an int >= 0"),
        ("train.jit_compile=yes", "train.jit_compile must be true or false"),
        ("train.lr_schedule.name=cosine", "train.lr_schedule.name must be"),
        ("train.lr_schedule.decay=0.5", "Unknown key(s) ['decay']"),
        ('train.lr_schedule={"name": "zaremba"}', "needs train.lr_schedule"),
        ("model.cell_kwargs=3", "model.cell_kwargs must be a JSON object"),
    ],
)
def test_values_are_typed_and_range_checked(override, expects):
    with pytest.raises(ConfigError) as e:
        apply_overrides(RunConfig(), [override])
    assert expects in str(e.value)


def test_json_configs_and_direct_construction_are_checked(tmp_path):
    path = tmp_path / "run.json"
    d = RunConfig().to_dict()
    d["train"]["epochs"] = "13"
    path.write_text(json.dumps(d))
    with pytest.raises(ConfigError, match="train.epochs must be an int"):
        load_config(str(path))
    path.write_text(json.dumps({"train": [1]}))
    with pytest.raises(ConfigError, match="section 'train'"):
        load_config(str(path))
    with pytest.raises(ConfigError, match="train.clipnorm"):
        TrainConfig(clipnorm=-1.0)
    with pytest.raises(ConfigError, match="name must be a string"):
        RunConfig.from_dict({"name": 3})


def test_every_field_has_a_check():
    for section, section_cls in (
        ("data", RunConfig().data),
        ("model", RunConfig().model),
        ("train", RunConfig().train),
    ):
        assert set(FIELD_CHECKS[section]) == set(vars(section_cls))


def test_schedule_parameters_match_the_schedules():
    import inspect

    from keras_rnnlm.callbacks.lr_schedules import SCHEDULES
    from keras_rnnlm.config import LR_SCHEDULE_PARAMS

    assert set(SCHEDULES) == set(LR_SCHEDULE_PARAMS)
    for name, cls in SCHEDULES.items():
        params = inspect.signature(cls).parameters
        expected = {
            k: p.default is inspect.Parameter.empty
            for k, p in params.items()
            if k != "initial_lr"
        }
        got = {k: req for k, (_, req) in LR_SCHEDULE_PARAMS[name].items()}
        assert got == expected, name


def test_every_recipe_preset_is_valid():
    """Recipe presets go through the same checks (they all pass them)."""
    from keras_rnnlm.recipe import config_from_preset
    from keras_rnnlm.recipe import load_recipe

    root = os.path.join(os.path.dirname(__file__), "..", "recipes")
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if not name.endswith(".py") or "PRESETS" not in open(path).read():
            continue  # the tuning recipes have a search space instead
        module = load_recipe(path)
        for preset in module.PRESETS:
            config_from_preset(module.PRESETS, preset)


_KEYS = st.one_of(
    st.sampled_from(
        [
            f"{section}.{key}"
            for section, checks in FIELD_CHECKS.items()
            for key in checks
        ]
        + ["name", "train.lr_schedule.decay", "train.lr_schedule.name"]
    ),
    st.text(max_size=20),
)
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats()
    | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
_VALUES = st.one_of(_JSON.map(json.dumps), st.text(max_size=20))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_KEYS, _VALUES), min_size=1, max_size=3))
def test_random_overrides_give_a_config_error_or_a_valid_config(items):
    """Random ``--set`` keys and values: a ConfigError or a config whose
    every field passes its check and that round-trips through JSON."""
    overrides = [f"{k}={v}" for k, v in items]
    try:
        config = apply_overrides(RunConfig(), overrides)
    except ConfigError:
        return
    again = RunConfig.from_dict(json.loads(config.to_json()))
    assert again == config
