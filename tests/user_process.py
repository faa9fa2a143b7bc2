"""Running the package as a user would: a fresh Python process with the
user's environment (no test-suite settings such as TF_CPP_MIN_LOG_LEVEL)."""

import os
import subprocess
import sys
import textwrap

SUITE_SETTINGS = ("KERAS_RNNLM_DEBUG", "TF_CPP_MIN_LOG_LEVEL", "KERAS_BACKEND")


def run_as_user(args, timeout=240, cwd=None, **env):
    """Runs ``python ARGS`` (in ``cwd``) and returns the completed process
    (text)."""
    environ = {k: v for k, v in os.environ.items() if k not in SUITE_SETTINGS}
    environ.update(env)
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=timeout,
        cwd=cwd,
    )


# Runs ARGV[1:] (a script, or ``-m MODULE``) with every import of
# TensorFlow failing, as on a Keras-on-JAX install without it.
_WITHOUT_TF = textwrap.dedent(
    """
    import runpy, sys

    class NoTensorFlow:
        def find_spec(self, name, path=None, target=None):
            top = name.split(".")[0]
            if top in ("tensorflow", "tensorflow_text", "tensorflow_serving"):
                raise ImportError(f"No module named {name!r} (blocked)")

    sys.meta_path.insert(0, NoTensorFlow())
    if sys.argv[1] == "-m":
        sys.argv = [sys.argv[2], *sys.argv[3:]]
        runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
    else:
        sys.argv = sys.argv[1:]
        runpy.run_path(sys.argv[0], run_name="__main__")
    """
)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_without_tensorflow(args, tmp_path, timeout=240, **env):
    """:func:`run_as_user` on Keras's JAX backend with TensorFlow made
    unimportable; ``args`` as for ``python``."""
    runner = tmp_path / "without_tf.py"
    runner.write_text(_WITHOUT_TF)
    env = {"KERAS_BACKEND": "jax", "PYTHONPATH": REPO, **env}
    return run_as_user([str(runner), *args], timeout=timeout, **env)


RECIPE = os.path.join(REPO, "recipes", "zaremba_ptb.py")

# How a process starts, as code to run first: the package imported alone,
# or a command that runs (``--print-config``: it resolves the config and
# returns without training), through ``keras-rnnlm`` or a recipe script.
ENTRIES = {
    "import": "import keras_rnnlm",
    "keras-rnnlm": (
        "from keras_rnnlm_launcher import main\n"
        f"main(['train', {RECIPE!r}, '--print-config'])"
    ),
    "recipe": (
        "import runpy, sys\n"
        f"sys.argv = [{RECIPE!r}, '--print-config']\n"
        "try:\n"
        f"    runpy.run_path({RECIPE!r}, run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass"
    ),
}
