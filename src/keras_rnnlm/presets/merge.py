"""Deep merge of nested preset dicts."""

import copy


def merge(base, *overrides):
    """A new dict: ``base`` with each of ``overrides`` merged in, in order.

    Where both sides hold a dict the two are merged key by key (at any
    depth); any other value of an override replaces the base's. Neither
    ``base`` nor the overrides are modified, and the result shares no
    mutable value with them::

        merge({"model": {"dropout": 0.4, "cell": "lstm"}},
              {"model": {"dropout": 0.5}, "name": "x"})
        == {"model": {"dropout": 0.5, "cell": "lstm"}, "name": "x"}
    """
    out = copy.deepcopy(base)
    for override in overrides:
        _merge_into(out, override)
    return out


def _merge_into(target, override):
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge_into(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
