from keras_rnnlm.presets import merge


def test_merge_is_deep_and_ordered():
    base = {"name": "a", "model": {"dropout": 0.4, "cell": "lstm"}}
    out = merge(
        base,
        {"model": {"dropout": 0.5}, "name": "b"},
        {"model": {"cell_kwargs": {"num_cells": 2}}},
        {"model": {"cell_kwargs": {"strategy": "max"}}},
    )
    assert out == {
        "name": "b",
        "model": {
            "dropout": 0.5,
            "cell": "lstm",
            "cell_kwargs": {"num_cells": 2, "strategy": "max"},
        },
    }
    assert (
        merge(base, {"model": {"dropout": 0.1}}, {"model": {"dropout": 0.2}})[
            "model"
        ]["dropout"]
        == 0.2
    )


def test_merge_replaces_non_dicts_and_adds_keys():
    base = {"model": {"hidden_sizes": [1, 2, 3], "x": {"y": 1}}}
    out = merge(base, {"model": {"hidden_sizes": [4], "x": None}, "train": {}})
    assert out == {"model": {"hidden_sizes": [4], "x": None}, "train": {}}
    # A dict replaces a non-dict value.
    assert merge({"a": 1}, {"a": {"b": 2}}) == {"a": {"b": 2}}
    assert merge(base) == base


def test_merge_copies_and_never_modifies_its_arguments():
    base = {"model": {"hidden_sizes": [1, 2]}}
    override = {"train": {"lr_schedule": {"name": "constant"}}}
    out = merge(base, override)
    out["model"]["hidden_sizes"].append(3)
    out["train"]["lr_schedule"]["name"] = "zaremba"
    assert base == {"model": {"hidden_sizes": [1, 2]}}
    assert override == {"train": {"lr_schedule": {"name": "constant"}}}
