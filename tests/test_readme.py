"""README.md's examples run and print what it says.

The quickstart's commands and figures are parsed out of README.md by
bench/quickstart.py (loaded here by path), so README, bench and test
read the same text: the commands run in a temporary directory and their
figures must be within README's stated tolerance (about a minute on two
cores). README's Python blocks run too: those on the quickstart's run
directory against this run, the training example on a tiny corpus.
"""

import contextlib
import importlib.util
import io
import math
import os

import pytest
from user_process import REPO
from user_process import SUITE_SETTINGS

README = os.path.join(REPO, "README.md")


def _load_quickstart():
    spec = importlib.util.spec_from_file_location(
        "bench_quickstart", os.path.join(REPO, "bench", "quickstart.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


quickstart = _load_quickstart()


def _python_blocks(title):
    """The Python code blocks of README's section ``title``."""
    with open(README) as f:
        text = quickstart.section(f.read(), title)
    return [
        "\n".join(block)
        for block in quickstart.code_blocks(text)
        if any(line.startswith(("import ", "from ")) for line in block)
    ]


def _ptb_available():
    data = os.environ.get("KERAS_RNNLM_DATA")
    if data and os.path.isfile(os.path.join(data, "ptb", "train.txt")):
        return True
    cache = os.path.join(os.path.expanduser("~"), ".keras", "datasets")
    return os.path.isfile(os.path.join(cache, "ptb", "train.txt"))


@pytest.fixture(scope="module")
def quickstart_run(tmp_path_factory):
    """README's quickstart run under a temporary directory: ``(root,
    what README says, what the commands gave)``."""
    if not _ptb_available():
        pytest.skip("PTB not available (set KERAS_RNNLM_DATA)")
    want = quickstart.quickstart(README)
    root = str(tmp_path_factory.mktemp("quickstart"))
    env = {k: v for k, v in os.environ.items() if k not in SUITE_SETTINGS}
    got = quickstart.run_quickstart(want["commands"], root, env=env)
    return root, want, got


def test_readme_quickstart_parses():
    want = quickstart.quickstart(README)
    verbs = [c.split("|")[-1].split()[1] for c in want["commands"]]
    assert verbs == ["train", "score", "export", "score"]
    assert 0 < want["tolerance"] <= 0.05
    assert want["record"] == "bench/results/quickstart.jsonl"
    assert os.path.exists(os.path.join(REPO, want["record"]))
    assert want["score"][-1].startswith("# corpus:")


# The quickstart_run tests are slow: a real Penn Treebank run (~50 s on 2
# cores); each of its commands has faster tests in tests/cli, and the README
# Python runs on a tiny corpus and run below.
@pytest.mark.slow
def test_quickstart_reproduces_readme_figures(quickstart_run):
    _, want, got = quickstart_run
    assert quickstart.compare(got, want) == []
    env = got["results"]["environment"]
    assert env["keras"] and env["cpu"]["model"]


@pytest.mark.slow
def test_readme_python_on_the_quickstart_run(quickstart_run):
    root, _, _ = quickstart_run
    (block,) = [b for b in _python_blocks("Quickstart") if "/tmp/quick" in b]
    namespace = {}
    exec(compile(quickstart.moved(block, root), README, "exec"), namespace)
    score = namespace["scorer"].score("the company said its profit rose")
    assert -50 < score < 0
    assert namespace["model"].name


def test_readme_training_example_on_a_tiny_corpus(tiny_corpus_dir):
    (block,) = _python_blocks("From Python")
    ptb = 'load_corpus("ptb", max_train_tokens=200_000)'
    assert ptb in block
    code = block.replace(ptb, f"load_corpus({tiny_corpus_dir!r})")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, README, "exec"), {})
    ppl = float(out.getvalue().split()[-1])
    assert math.isfinite(ppl) and 1 < ppl < 30


@pytest.mark.slow
def test_readme_generation_section(tiny_run):
    """The "Generating text" section's commands are `keras-rnnlm
    generate` command lines the parser accepts, and its Python runs (on
    the tiny run instead of the quickstart's)."""
    import shlex

    from keras_rnnlm_launcher import build_parser

    with open(README) as f:
        text = quickstart.section(f.read(), "Generating text")
    commands = [
        c
        for block in quickstart.code_blocks(text)
        for c in quickstart.shell_commands(block)
        if c.startswith("keras-rnnlm")
    ]
    assert len(commands) == 2
    for command in commands:
        argv = shlex.split(command.replace("\\\n", " "))[1:]
        args = build_parser().parse_args(argv)
        assert args.target == "keras_rnnlm.cli.generate:run_generate"
    # the run directory python recipes/mlstm_ptb.py writes
    spec = importlib.util.spec_from_file_location(
        "mlstm_ptb", os.path.join(REPO, "recipes", "mlstm_ptb.py")
    )
    recipe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recipe)
    preset = recipe.PRESETS[recipe.DEFAULT_PRESET]
    assert f"generate {preset['train']['out_dir']} " in commands[0]
    (block,) = _python_blocks("Generating text")
    namespace = {}
    code = block.replace('"/tmp/quick"', repr(tiny_run))
    exec(compile(code, README, "exec"), namespace)
    assert isinstance(namespace["lm"].generate("the cat", seed=1), str)
