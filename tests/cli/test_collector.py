"""keras_rnnlm_launcher/collector.py: a command's imports are frozen out
of the cyclic collector's walks (paused while the console script loads
them); ``import keras_rnnlm`` alone leaves the collector as it is."""

import gc
import subprocess
import sys

from bench.harness import ROOT
from keras_rnnlm_launcher.collector import freeze_imports


def _python(code):
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_paused_freezes_what_the_block_built_and_turns_the_collector_on():
    out = _python(
        "import gc\n"
        "from keras_rnnlm_launcher.collector import paused\n"
        "with paused():\n"
        "    inside = gc.isenabled()\n"
        "    import json, email.mime.text\n"
        "print(inside, gc.isenabled(), gc.get_freeze_count() > 1000)\n"
    )
    assert out.split() == ["False", "True", "True"]


def test_paused_keeps_a_collector_the_user_turned_off_and_survives_errors():
    out = _python(
        "import gc\n"
        "from keras_rnnlm_launcher.collector import paused\n"
        "gc.disable()\n"
        "with paused():\n"
        "    pass\n"
        "print(gc.isenabled())\n"
        "gc.enable()\n"
        "try:\n"
        "    with paused():\n"
        "        raise ImportError('x')\n"
        "except ImportError:\n"
        "    print(gc.isenabled())\n"
    )
    assert out.split() == ["False", "True"]


def test_only_the_first_freeze_of_a_process_is_made():
    """In this test process (which an in-process command may have frozen
    already): a second freeze pins nothing more."""
    freeze_imports()
    frozen = gc.get_freeze_count()
    kept = [[i] for i in range(5000)]
    freeze_imports()
    assert frozen > 0 and gc.get_freeze_count() == frozen
    assert len(kept) == 5000


def test_import_alone_leaves_the_collector_and_a_command_freezes_it():
    out = _python(
        "import gc, keras_rnnlm\n"
        "print(gc.isenabled(), gc.get_freeze_count())\n"
        "from keras_rnnlm.cli.process import prepare_process\n"
        "prepare_process()\n"
        "print(gc.isenabled(), gc.get_freeze_count() > 100000)\n"
    )
    assert out.split() == ["True", "0", "True", "True"]
