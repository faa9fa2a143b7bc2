"""Running the package as a user would: a fresh Python process with the
user's environment (no test-suite settings such as TF_CPP_MIN_LOG_LEVEL)."""

import os
import subprocess
import sys

SUITE_SETTINGS = ("KERAS_RNNLM_DEBUG", "TF_CPP_MIN_LOG_LEVEL", "KERAS_BACKEND")


def run_as_user(args, timeout=240, **env):
    """Runs ``python ARGS`` and returns the completed process (text)."""
    environ = {k: v for k, v in os.environ.items() if k not in SUITE_SETTINGS}
    environ.update(env)
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=timeout,
    )
