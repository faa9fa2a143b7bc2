"""bench/harness/processes.py: a watched child's peak RSS is its own,
not the bench's that started it."""

import os
import sys
import time

from bench.harness.processes import import_rss_mb
from bench.harness.processes import interleave
from bench.harness.processes import vm_hwm_mb
from bench.harness.processes import watch

#: A child that holds ~10 MB for a while.
CHILD = [sys.executable, "-c", "import time; time.sleep(1.0)"]


def _hold(mb):
    """``mb`` MB resident in this process."""
    block = bytearray(mb * 2**20)
    for i in range(0, len(block), 4096):
        block[i] = 1
    return block


def test_a_watched_childs_peak_rss_leaves_out_the_parents():
    """Linux carries the starting process's peak into a child's
    ``ru_maxrss`` over ``exec`` (``wait4`` read it as ~the parent's)."""
    held = _hold(400)
    assert vm_hwm_mb() >= 400
    ended = watch(CHILD, None, lambda: False, 30, poll=0.1)
    soon = time.monotonic() + 0.6  # started, not ended
    killed = watch(CHILD, None, lambda: time.monotonic() > soon, 30, poll=0.1)
    assert ended["returncode"] == 0 and killed["killed"]
    assert 1 < ended["rss_mb"] < 200, ended
    assert 1 < killed["rss_mb"] < 200, killed
    del held


def test_no_peak_of_a_process_that_is_gone():
    assert vm_hwm_mb(2**22 + 7) is None  # above Linux's largest pid


def test_an_import_alone_reports_its_own_peak():
    got = import_rss_mb("import json", dict(os.environ))
    assert 1.0 < got < 200.0  # a bare interpreter, not this process


def test_interleave_runs_every_key_each_repeat_and_may_alternate():
    calls = []

    def measure(key):
        calls.append(key)
        return len(calls)

    samples = interleave("ab", 3, measure)
    assert calls == list("ababab")
    assert samples == {"a": [1, 3, 5], "b": [2, 4, 6]}
    calls.clear()
    samples = interleave("ab", 3, measure, alternate=True)
    assert calls == list("abbaab")
    assert samples == {"a": [1, 4, 5], "b": [2, 3, 6]}
