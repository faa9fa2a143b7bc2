"""A command that runs (``keras-rnnlm``, a recipe) keeps XLA's programs
in a cache directory keyed by backend, CPU and XLA settings, and loads
them in its next run; ``import keras_rnnlm`` alone does not, and the
user's choice is kept (:mod:`keras_rnnlm._compile_cache`)."""

import json
import os

import pytest
from user_process import ENTRIES
from user_process import run_as_user

from keras_rnnlm import _compile_cache

# ENTRY, then one XLA-compiled function; the last line: the cache's
# state, its directory, the result and TF_XLA_FLAGS.
CODE = """
import contextlib, io, json, os
with contextlib.redirect_stdout(io.StringIO()):
    ENTRY
import tensorflow as tf
from keras_rnnlm import _compile_cache
f = tf.function(lambda a: tf.tanh(a @ a) + 1.0, jit_compile=True)
value = float(tf.reduce_sum(f(tf.reshape(tf.range(16.0), (4, 4)) / 16.0)))
print(json.dumps([_compile_cache.state, _compile_cache.directory, value,
                  os.environ.get("TF_XLA_FLAGS", "")]))
"""


def _run(entry, **env):
    code = CODE.replace("ENTRY", ENTRIES[entry].replace("\n", "\n    "))
    env.setdefault("KERAS_BACKEND", "tensorflow")
    env.setdefault("TF_XLA_FLAGS", "")  # not an in-process command's
    proc = run_as_user(["-c", code], **env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _programs(path):
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


@pytest.mark.slow
def test_a_command_fills_the_cache_and_its_next_run_loads_it(tmp_path):
    root = tmp_path / "cache"
    state, directory, value, flags = _run(
        "keras-rnnlm", KERAS_RNNLM_COMPILE_CACHE=str(root)
    )
    assert state == "on"
    assert os.path.dirname(directory) == str(root)
    assert f"{_compile_cache.TF_FLAG}={directory}" in flags
    programs = _programs(directory)
    assert programs, "the compiled program was not kept"
    again = _run("keras-rnnlm", KERAS_RNNLM_COMPILE_CACHE=str(root))
    assert again[1] == directory and again[2] == value
    assert _programs(directory) == programs  # loaded, not compiled anew


@pytest.mark.slow
def test_import_alone_and_off_keep_no_cache(tmp_path):
    root = tmp_path / "cache"
    state, _, _, flags = _run("import", KERAS_RNNLM_COMPILE_CACHE=str(root))
    assert state is None and _compile_cache.TF_FLAG not in flags
    state, _, _, flags = _run("keras-rnnlm", KERAS_RNNLM_COMPILE_CACHE="off")
    assert state == "off" and _compile_cache.TF_FLAG not in flags
    assert not root.exists()


def test_the_users_own_tensorflow_cache_is_kept(tmp_path):
    own = tmp_path / "own"
    user_flags = f"{_compile_cache.TF_FLAG}={own}"
    state, _, _, flags = _run(
        "keras-rnnlm",
        KERAS_RNNLM_COMPILE_CACHE=str(tmp_path / "cache"),
        TF_XLA_FLAGS=user_flags,
    )
    assert state == "user" and flags == user_flags
    assert _programs(own) and not (tmp_path / "cache").exists()


def test_a_directory_that_cannot_be_made_leaves_the_cache_off(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    environ = {"KERAS_RNNLM_COMPILE_CACHE": str(blocker / "cache")}
    assert _compile_cache.use_compile_cache(environ) is None
    assert _compile_cache.state == "unavailable"
    assert "TF_XLA_FLAGS" not in environ


def test_the_key_changes_with_the_cpu_the_isa_cap_and_the_threads(
    monkeypatch,
):
    base = {"KERAS_BACKEND": "tensorflow"}
    key = _compile_cache.cache_key(base)
    assert key == _compile_cache.cache_key(dict(base))
    assert key.startswith("tensorflow-")
    capped = {**base, "XLA_FLAGS": "--xla_cpu_max_isa=AVX2"}
    assert _compile_cache.cache_key(capped) != key
    threads = {**base, "TF_NUM_INTRAOP_THREADS": "1"}
    assert _compile_cache.cache_key(threads) != key
    assert _compile_cache.cache_key({"KERAS_BACKEND": "jax"}) != key
    info = _compile_cache._cpuinfo()
    other = {**info, "flags": info.get("flags", "") + " amx_tile"}
    monkeypatch.setattr(_compile_cache, "_cpuinfo", lambda: other)
    assert _compile_cache.cache_key(base) != key


@pytest.mark.parametrize("value", ["", None])
def test_the_default_directory_is_the_users_cache(value, tmp_path):
    environ = {"XDG_CACHE_HOME": str(tmp_path)}
    if value is not None:
        environ[_compile_cache.ENV] = value
    assert _compile_cache.cache_root(environ) == os.path.join(
        str(tmp_path), "keras_rnnlm", "xla"
    )


@pytest.mark.slow
def test_a_damaged_program_is_removed_with_one_line(tiny_config, tmp_path):
    """A program file cut short fails TensorFlow's load: the command
    removes it and says so in one line; its next run compiles anew and
    evaluates as the first did."""
    from run_dirs import write_random_run

    run, _ = write_random_run(tiny_config, str(tmp_path / "run"))
    cache = tmp_path / "cache"
    args = ["-m", "keras_rnnlm.cli", "evaluate", run, "--split", "test"]
    env = {"KERAS_RNNLM_COMPILE_CACHE": str(cache), "TF_XLA_FLAGS": ""}

    def nll(proc):
        assert proc.returncode == 0, proc.stderr[-2000:]
        out = proc.stdout
        return json.JSONDecoder().raw_decode(out[out.index("\n{") + 1 :])[0][
            "test"
        ]["nll"]

    first = nll(run_as_user(args, **env))
    (directory,) = [cache / d for d in os.listdir(cache)]
    programs = _programs(directory)
    assert programs
    for name in programs:
        data = (directory / name).read_bytes()
        (directory / name).write_bytes(data[: len(data) // 2])
    damaged = run_as_user(args, **env)
    assert damaged.returncode == 2
    lines = damaged.stderr.strip().splitlines()
    assert len(lines) == 1 and "damaged program file" in lines[0], lines
    assert "KERAS_RNNLM_COMPILE_CACHE=off" in lines[0]
    assert not set(_programs(directory)) & set(programs)
    assert nll(run_as_user(args, **env)) == first
