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
that a bad request gets a 4xx without reaching the model. A gRPC tensor's
declared shape is checked before any value is expanded; an input of
unknown rank (``generate``'s parameters: a scalar or one value per
prompt) holds at most ``max_rows`` values. A ``generate`` request counts
its continuations (prompts x ``num_samples``) against ``max_rows`` and
each prompt's tokens plus ``max_tokens`` against ``max_sentence_tokens``
(its values are the graph's to check). Outputs go back
to gRPC clients in the typed fields of ``TensorProto`` (``float_val``,
``int_val``, ``string_val``...), as TF Serving writes them by default.
"""

import base64

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2
from tensorflow.core.framework import tensor_shape_pb2
from tensorflow.core.framework import types_pb2

from keras_rnnlm.serving.errors import ServingError
from keras_rnnlm.serving.limits import Limits


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
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError:
            # A lone surrogate escape (\ud800) is not text.
            raise _bad(
                "JSON Parse error: The surrogate pair in string is invalid."
            ) from None
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
        if shape is None and array.size > limits.max_rows:
            raise _bad(
                f"input {name} has {array.size} values > {limits.max_rows} "
                "(--max-rows)"
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
    steps = row_steps(signature, arrays, servable)
    longest = 0 if steps is None or not len(steps) else int(steps.max()) - 1
    ids = arrays.get("token_ids")
    if ids is not None and ids.ndim == 2:
        longest = max(longest, ids.shape[1])
    what = "a sentence has"
    if "prompts" in arrays and rows is not None:
        what = "a prompt and its max_tokens make"
        continuations = rows * _largest(arrays.get("num_samples"), 1)
        if continuations > limits.max_rows:
            raise _bad(
                f"too many continuations: prompts x num_samples = "
                f"{continuations} > {limits.max_rows} per request "
                "(--max-rows)"
            )
    if longest > limits.max_sentence_tokens:
        raise _bad(
            f"{what} {longest} tokens > {limits.max_sentence_tokens}"
            " (--max-sentence-tokens)"
        )
    return arrays


def _largest(array, default):
    """The largest value of an integer input (``default`` if absent or
    empty)."""
    if array is None or not array.size:
        return default
    return int(np.max(array))


def row_steps(signature, arrays, servable):
    """The time steps each row of a call takes before padding, as the
    export counts them for its token budget (``rows x padded length <=
    max_tokens``): a sentence's or prefix's tokens + 1 (``<eos>`` / the
    start token), ``score_ids``' ``lengths`` + 1, ``step``'s ``T``,
    ``generate``'s prompt tokens + 1 + its ``max_tokens`` (a scalar or
    one per prompt; prompt tokens + 1 where they are of another shape);
    None for a call without a time dimension (``initial_state``)."""
    prompts = arrays.get("prompts")
    if prompts is not None and prompts.ndim == 1:
        steps = np.fromiter(
            (_count_tokens(s, servable) + 1 for s in prompts),
            np.int64,
            len(prompts),
        )
        max_tokens = arrays.get("max_tokens")
        if max_tokens is not None and max_tokens.size in (1, len(steps)):
            wanted = max_tokens.reshape(-1).astype(np.int64)
            steps = steps + np.maximum(wanted, 0)
        return steps
    for name in ("sentences", "prefixes"):
        array = arrays.get(name)
        if array is not None and array.ndim == 1:
            return np.fromiter(
                (_count_tokens(s, servable) + 1 for s in array),
                np.int64,
                len(array),
            )
    lengths = arrays.get("lengths")
    if lengths is not None and lengths.ndim == 1:
        return lengths.astype(np.int64) + 1
    ids = arrays.get("token_ids")
    if ids is not None and ids.ndim == 2:
        return np.full(ids.shape[0], ids.shape[1], np.int64)
    return None


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


# TensorProto's typed value field of each dtype (DataType enum values
# of tensorflow/core/framework/types.proto).
_FIELDS = {
    1: ("float_val", np.float32),  # DT_FLOAT
    2: ("double_val", np.float64),  # DT_DOUBLE
    3: ("int_val", np.int32),  # DT_INT32
    4: ("int_val", np.uint8),  # DT_UINT8
    5: ("int_val", np.int16),  # DT_INT16
    6: ("int_val", np.int8),  # DT_INT8
    7: ("string_val", object),  # DT_STRING
    9: ("int64_val", np.int64),  # DT_INT64
    10: ("bool_val", np.bool_),  # DT_BOOL
    17: ("int_val", np.uint16),  # DT_UINT16
    22: ("uint32_val", np.uint32),  # DT_UINT32
    23: ("uint64_val", np.uint64),  # DT_UINT64
}


def dtype_name(enum):
    """``DT_FLOAT`` for 1; ``DataType 999`` for a value outside the enum."""
    try:
        return types_pb2.DataType.Name(int(enum))
    except ValueError:
        return f"DataType {enum}"


def _declared_shape(signature, name, proto, limits):
    """The dims a TensorProto declares, checked against the signature and
    ``limits`` before anything is expanded: a batch of at most
    ``max_rows``, a time dimension of at most ``max_sentence_tokens``,
    the signature's fixed dimensions exactly."""
    if proto.tensor_shape.unknown_rank:
        raise _bad(f"input {name}: tensor_shape has an unknown rank")
    dims = [d.size for d in proto.tensor_shape.dim]
    if any(d < 0 for d in dims):
        raise _bad(f"input {name}: tensor_shape has a negative dimension")
    _, want = signature.inputs[name]
    if want is not None:
        if len(dims) != len(want):
            raise _bad(
                f"input {name} must have rank {len(want)} (shape "
                f"{[d if d >= 0 else None for d in want]}); got shape {dims}"
            )
        for i, (got, w) in enumerate(zip(dims, want)):
            if w >= 0 and got != w:
                raise _bad(f"input {name} must have shape {want}; got {dims}")
            if w < 0 and i == 0 and got > limits.max_rows:
                raise _bad(
                    f"too many rows: {got} > {limits.max_rows} per request "
                    "(--max-rows)"
                )
            if w < 0 and i > 0 and got > limits.max_sentence_tokens:
                raise _bad(
                    f"input {name} has {got} steps > "
                    f"{limits.max_sentence_tokens} (--max-sentence-tokens)"
                )
    else:
        if len(dims) > 8:
            raise _bad(f"input {name}: rank {len(dims)} > 8")
        n = int(np.prod(dims, dtype=object)) if dims else 1
        if n > limits.max_rows:
            raise _bad(
                f"input {name} has {n} values > {limits.max_rows} (--max-rows)"
            )
    return dims


def _proto_values(name, proto, dims):
    """The NumPy array of a TensorProto whose shape has been checked: its
    ``tensor_content``, or its typed field; fewer typed values than
    elements repeat the last one (TensorFlow's ``Tensor::FromProto``),
    none at all for a non-empty shape is refused."""
    field, np_dtype = _FIELDS[proto.dtype]
    n = int(np.prod(dims, dtype=np.int64)) if dims else 1
    if proto.tensor_content:
        if np_dtype is object:
            raise _bad(
                f"input {name}: DT_STRING values go in string_val, not "
                "tensor_content"
            )
        size = np.dtype(np_dtype).itemsize
        if len(proto.tensor_content) != n * size:
            raise _bad(
                f"input {name}: tensor_content has "
                f"{len(proto.tensor_content)} bytes; shape {dims} of "
                f"{dtype_name(proto.dtype)} needs {n * size}"
            )
        flat = np.frombuffer(proto.tensor_content, np_dtype).copy()
        return flat.reshape(dims)
    values = getattr(proto, field)
    k = len(values)
    if n == 0:
        return np.zeros(dims, np_dtype if np_dtype is not object else object)
    if k == 0:
        raise _bad(
            f"input {name}: shape {dims} has {n} elements but the tensor "
            f"has no values ({field} is empty)"
        )
    if k > n:
        raise _bad(
            f"input {name}: {k} values in {field} for shape {dims} "
            f"({n} elements)"
        )
    if np_dtype is object:
        flat = np.empty(n, dtype=object)
        flat[:k] = list(values)
    else:
        try:
            flat = np.empty(n, dtype=np_dtype)
            flat[:k] = np.asarray(values, dtype=np_dtype)
        except (OverflowError, ValueError) as e:
            raise _bad(f"input {name}: {e}") from None
    if k < n:
        flat[k:] = flat[k - 1]
    return flat.reshape(dims)


def from_tensor_protos(signature, protos, limits=None):
    """The ``inputs`` map of a gRPC ``PredictRequest`` (``{name:
    TensorProto}``) -> NumPy arrays, each name, dtype and declared shape
    checked against ``signature`` and ``limits`` (default
    :class:`~keras_rnnlm.serving.limits.Limits`) before its values are
    read."""
    limits = limits or Limits()
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
                f"input {name} must be {want.name} "
                f"({dtype_name(want.as_datatype_enum)}); got "
                f"{dtype_name(proto.dtype)}"
            )
        if proto.dtype not in _FIELDS:
            raise _bad(f"input {name}: unsupported dtype {want.name}")
        dims = _declared_shape(signature, name, proto, limits)
        arrays[name] = _proto_values(name, proto, dims)
    return arrays


def to_tensor_proto(array):
    """A NumPy output -> a ``TensorProto`` with its values in the typed
    field of its dtype (TF Serving's default serialisation, "as proto
    fields"; ``tensor_content`` is left empty)."""

    array = np.asarray(array)
    if array.dtype == object or array.dtype.kind in "SU":
        enum = 7
        values = [
            v if isinstance(v, bytes) else str(v).encode("utf-8")
            for v in array.reshape(-1)
        ]
    else:
        enum = tf.dtypes.as_dtype(array.dtype).as_datatype_enum
        if enum not in _FIELDS:
            raise ServingError(
                "INTERNAL", f"output dtype {array.dtype} has no proto field"
            )
        values = array.reshape(-1).tolist()
    proto = tensor_pb2.TensorProto(
        dtype=enum,
        tensor_shape=tensor_shape_pb2.TensorShapeProto(
            dim=[
                tensor_shape_pb2.TensorShapeProto.Dim(size=d)
                for d in array.shape
            ]
        ),
    )
    getattr(proto, _FIELDS[enum][0]).extend(values)
    return proto


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
