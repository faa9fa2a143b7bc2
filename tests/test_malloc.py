"""A command that runs (``keras-rnnlm``, a recipe) gives glibc's allocator
one arena a core, and nothing else, unless the user chose otherwise;
``import keras_rnnlm`` alone leaves it as it is
(:mod:`keras_rnnlm._malloc`)."""

import platform
import sys

import pytest
from user_process import ENTRIES
from user_process import run_as_user

from keras_rnnlm import _malloc

glibc_only = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="mallopt is glibc's",
)

# A fresh process: ENTRY, then a TensorFlow op, then free 50 MB of 64 KiB
# blocks (below glibc's mmap threshold, so from the heap) and let eight
# Python threads allocate at once. Its last line: the tuning's state, the
# heap bytes still held after the free (glibc trims them unless a
# threshold was fixed) and the cores; glibc's malloc_stats (stderr)
# counts the arenas.
CODE = """
import ctypes, threading
ENTRY
from keras_rnnlm import _malloc
import tensorflow as tf
tf.reduce_sum(tf.ones((64, 64))).numpy()
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks "
                "uordblks fordblks keepcost".split()]
libc.mallinfo2.restype = Info
before = libc.mallinfo2().arena
blocks = [libc.malloc(65536) for _ in range(800)]
for b in reversed(blocks):
    libc.free(b)
held = libc.mallinfo2().arena - before
barrier = threading.Barrier(8)
def work():
    barrier.wait()
    keep = [bytearray(50000) for _ in range(50)]
    barrier.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
libc.malloc_stats()
print(_malloc.state, held // 2**20, _malloc.cores())
"""


def run(entry, **env):
    code = CODE.replace("ENTRY", ENTRIES[entry])
    p = run_as_user(["-c", code], TF_CPP_MIN_LOG_LEVEL="3", **env)
    assert p.returncode == 0, p.stderr
    state, held_mb, cores = p.stdout.split("\n")[-2].split()
    arenas = p.stderr.count("Arena ")
    return state, int(held_mb), arenas, int(cores)


@glibc_only
@pytest.mark.parametrize("entry", ["keras-rnnlm", "recipe"])
def test_a_command_tunes_glibc_malloc(entry):
    state, held_mb, arenas, cores = run(entry)
    assert state == "tuned"
    # Every thread, TensorFlow's included, uses one of one arena a core
    # (glibc's default: up to eight a core) ...
    assert 1 <= arenas <= cores
    # ... and glibc's dynamic thresholds are left on: a fixed trim
    # threshold would keep the freed 50 MB (and it made PyTorch's mLSTM
    # training 3.5x slower in a process that imported the package).
    assert held_mb < 5


@glibc_only
def test_import_keras_rnnlm_leaves_glibc_malloc_alone():
    state, held_mb, arenas, cores = run("import")
    assert state == "None"  # tune_malloc never ran
    assert held_mb < 5
    # Eight threads allocating at once get arenas of their own (this
    # tells glibc's defaults from the tuning on a machine of up to 8
    # cores).
    assert arenas > min(cores, 8)


@glibc_only
def test_keras_rnnlm_malloc_default_keeps_glibc_defaults():
    # The other user choices (MALLOC_ARENA_MAX, GLIBC_TUNABLES) take the
    # same path: test_user_chose.
    state, held_mb, arenas, cores = run(
        "keras-rnnlm", KERAS_RNNLM_MALLOC="default"
    )
    assert state == "default"
    assert held_mb < 5  # glibc trims the freed top of the heap
    assert arenas > min(cores, 8)


def test_user_chose():
    assert not _malloc.user_chose({})
    assert not _malloc.user_chose({"KERAS_RNNLM_MALLOC": "tuned"})
    assert _malloc.user_chose({"KERAS_RNNLM_MALLOC": "default"})
    assert _malloc.user_chose({"MALLOC_TRIM_THRESHOLD_": "1"})
    assert _malloc.user_chose({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"})
    assert not _malloc.user_chose({"GLIBC_TUNABLES": "glibc.cpu.x86_foo=1"})


def test_an_unknown_value_is_one_line_and_no_tuning(capsys):
    assert _malloc.user_chose({"KERAS_RNNLM_MALLOC": "fast"})
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "KERAS_RNNLM_MALLOC='fast'" in err
