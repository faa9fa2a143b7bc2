"""Requests in TF Serving's formats -> checked NumPy inputs, and back.

REST (``POST .../NAME:predict``) takes the row format, ``{"instances":
[...]}`` (one object per row, or bare values when the signature has one
input) or the columnar format, ``{"inputs": {...}}`` (or a bare value);
``signature_name`` defaults to ``serving_default``. Strings may be given
as ``{"b64": "..."}``. The answer is ``{"predictions": [...]}`` (row) or
``{"outputs": {...}}`` (columnar), a bare value when there is one output.
gRPC takes and returns ``TensorProto`` maps.

Every input is checked against the SignatureDef (names, dtype, rank) and
against the server's limits (rows per request, tokens per sentence), so
that a bad request gets a 4xx without reaching the model.
"""

import base64

import numpy as np
import tensorflow as tf

from keras_rnnlm.serving.errors import ServingError


def _bad(message):
    return ServingError("INVALID_ARGUMENT", message)


def _decode_strings(value):
    if isinstance(value, list):
        return [_decode_strings(v) for v in value]
    if isinstance(value, dict):
        if set(value) != {"b64"} or not isinstance(value["b64"], str):
            raise _bad('a string value must be a string or {"b64": "..."}')
        try:
            return base64.b64decode(value["b64"], validate=True)
        except ValueError as e:
            raise _bad(f"invalid base64 string: {e}") from None
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bytes):
        return value
    raise _bad(f"expected a string, got {type(value).__name__} {value!r:.40}")


def _check_numbers(value, kind):
    if isinstance(value, list):
        for v in value:
            _check_numbers(v, kind)
        return
    ok = (
        isinstance(value, int) and not isinstance(value, bool)
        if kind == "int"
        else isinstance(value, (int, float)) and not isinstance(value, bool)
    )
    if not ok:
        raise _bad(f"expected {kind} values, got {value!r:.40}")


def to_array(value, dtype, name):
    """A JSON value -> a NumPy array of the signature input's dtype."""

    if dtype == tf.string:
        value = _decode_strings(value)
        np_dtype = object
    elif dtype.is_integer:
        _check_numbers(value, "int")
        np_dtype = dtype.as_numpy_dtype
    elif dtype.is_floating:
        _check_numbers(value, "float")
        np_dtype = dtype.as_numpy_dtype
    elif dtype == tf.bool:
        np_dtype = bool
    else:
        raise _bad(f"input {name}: unsupported dtype {dtype.name}")
    try:
        array = np.array(value, dtype=np_dtype)
    except (ValueError, OverflowError) as e:
        raise _bad(f"input {name}: {e}") from None
    if dtype == tf.string and array.dtype == object:
        # np.array of nested lists of unequal lengths gives an object array
        # of lists; a string tensor holds bytes only.
        if any(not isinstance(v, bytes) for v in array.reshape(-1)):
            raise _bad(f"input {name}: ragged or mixed nested lists")
    if dtype.is_integer and np.issubdtype(array.dtype, np.integer):
        info = np.iinfo(dtype.as_numpy_dtype)
        if array.size and (array.min() < info.min or array.max() > info.max):
            raise _bad(f"input {name}: value out of range of {dtype.name}")
    return array


def check_inputs(signature, arrays, limits, servable):
    """Checks names, ranks, rows and sentence lengths; returns ``arrays``."""

    missing = set(signature.inputs) - set(arrays)
    extra = set(arrays) - set(signature.inputs)
    if missing or extra:
        raise _bad(
            f"signature {signature.name!r} takes inputs "
            f"{sorted(signature.inputs)}; missing {sorted(missing)}, "
            f"unexpected {sorted(extra)}"
        )
    rows = None
    for name, array in arrays.items():
        dtype, shape = signature.inputs[name]
        if shape is not None and array.ndim != len(shape):
            raise _bad(
                f"input {name} must have rank {len(shape)} "
                f"(shape {[d if d >= 0 else None for d in shape]}); got "
                f"shape {list(array.shape)}"
            )
        if shape is not None:
            for got, want in zip(array.shape, shape):
                if want >= 0 and got != want:
                    raise _bad(
                        f"input {name} must have shape {shape}; got "
                        f"{list(array.shape)}"
                    )
        if shape:
            if array.shape[0] == 0:
                raise _bad(f"empty batch: input {name} has no rows")
            if rows is not None and array.shape[0] != rows:
                raise _bad("inputs have different numbers of rows")
            rows = array.shape[0]
        elif name == "batch_size" and not 1 <= int(array) <= limits.max_rows:
            raise _bad(f"batch_size must be in 1..{limits.max_rows}")
    if rows is not None and rows > limits.max_rows:
        raise _bad(
            f"too many rows: {rows} > {limits.max_rows} per request "
            "(--max-rows)"
        )
    longest = 0
    for name, array in arrays.items():
        dtype, _ = signature.inputs[name]
        if dtype == tf.string:
            for s in array.reshape(-1):
                longest = max(longest, _count_tokens(s, servable))
        elif name == "token_ids" and array.ndim == 2:
            longest = max(longest, array.shape[1])
    if longest > limits.max_sentence_tokens:
        raise _bad(
            f"a sentence has {longest} tokens > {limits.max_sentence_tokens}"
            " (--max-sentence-tokens)"
        )
    return arrays


def _count_tokens(sentence, servable):
    text = sentence.decode("utf-8", "replace")
    if servable.tokenization == "whitespace":
        return len(text.split())
    return len(text)


def parse_predict(body, signature_of, limits):
    """A REST predict body (parsed JSON) -> ``(signature, arrays, row)``
    where ``row`` says whether the answer uses the row format."""
    if not isinstance(body, dict):
        raise _bad("the request body must be a JSON object")
    name = body.get("signature_name", "serving_default")
    if not isinstance(name, str):
        raise _bad("signature_name must be a string")
    signature = signature_of(name)
    has_rows, has_cols = "instances" in body, "inputs" in body
    if has_rows == has_cols:
        raise _bad(
            'the body must have exactly one of "instances" (row format) '
            'or "inputs" (columnar format)'
        )
    names = sorted(signature.inputs)
    if has_rows:
        instances = body["instances"]
        if not isinstance(instances, list):
            raise _bad('"instances" must be a list')
        if not instances:
            raise _bad('empty batch: "instances" is empty')
        if len(instances) > limits.max_rows:
            raise _bad(
                f"too many rows: {len(instances)} > {limits.max_rows} per "
                "request (--max-rows)"
            )
        if all(isinstance(i, dict) for i in instances) and not _is_b64(
            instances[0]
        ):
            columns = {}
            for i in instances:
                if set(i) != set(instances[0]):
                    raise _bad("every instance must have the same keys")
                for k, v in i.items():
                    columns.setdefault(k, []).append(v)
        elif len(names) == 1:
            columns = {names[0]: instances}
        else:
            raise _bad(
                f"signature {name!r} has inputs {names}: each instance "
                "must be an object naming them"
            )
    else:
        inputs = body["inputs"]
        if isinstance(inputs, dict) and not _is_b64(inputs):
            columns = inputs
        elif len(names) == 1:
            columns = {names[0]: inputs}
        else:
            raise _bad(f'"inputs" must be an object naming {names}')
    arrays = {}
    for k, v in columns.items():
        if k not in signature.inputs:
            raise _bad(
                f"signature {name!r} has no input {k!r} (inputs: {names})"
            )
        arrays[k] = to_array(v, signature.inputs[k][0], k)
    return signature, arrays, has_rows


def from_tensor_protos(signature, protos):
    """The ``inputs`` map of a gRPC ``PredictRequest`` (``{name:
    TensorProto}``) -> NumPy arrays, each name and dtype checked against
    ``signature``."""
    arrays = {}
    for name, proto in protos.items():
        if name not in signature.inputs:
            raise _bad(
                f"signature {signature.name!r} has no input {name!r} "
                f"(inputs: {sorted(signature.inputs)})"
            )
        want = signature.inputs[name][0]
        if proto.dtype != want.as_datatype_enum:
            raise _bad(
                f"input {name} must be {want.name}; got "
                f"{tf.dtypes.as_dtype(proto.dtype).name}"
            )
        try:
            arrays[name] = tf.make_ndarray(proto)
        except Exception as e:  # noqa: BLE001  (a malformed proto)
            raise _bad(f"input {name}: {e}") from None
    return arrays


def _is_b64(value):
    return isinstance(value, dict) and set(value) == {"b64"}


def to_json_value(array):
    """A NumPy output -> JSON-ready nested lists (strings as UTF-8 text,
    invalid bytes replaced)."""
    if array.dtype == object:
        return np.vectorize(
            lambda b: b.decode("utf-8", "replace"), otypes=[object]
        )(array).tolist()
    return array.tolist()


def format_predict(outputs, row):
    """TF Serving's predict answer for NumPy ``outputs``."""
    names = sorted(outputs)
    values = {k: to_json_value(outputs[k]) for k in names}
    if not row:
        return {"outputs": values[names[0]] if len(names) == 1 else values}
    n = len(next(iter(values.values())))
    if len(names) == 1:
        return {"predictions": values[names[0]]}
    return {"predictions": [{k: values[k][i] for k in names} for i in range(n)]}
