"""bench/ as a package: every module at its top is a bench or tool run as
``python -m bench.NAME``, nothing edits ``sys.path``, functions stay
short, and the PyTorch reference models live in bench/reference."""

import ast
import pathlib

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
MODULES = sorted(BENCH.rglob("*.py"))
TOP = [p for p in MODULES if p.parent == BENCH and p.name != "__init__.py"]
#: The most lines a function of bench/ may have.
MAX_FUNCTION_LINES = 80


def _tree(path):
    return ast.parse(path.read_text(), filename=str(path))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_no_sys_path_edits_and_short_functions(path):
    text = path.read_text()
    assert "sys.path" not in text
    for node in ast.walk(_tree(path)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = node.end_lineno - node.lineno + 1
            assert lines <= MAX_FUNCTION_LINES, (node.name, lines)


@pytest.mark.parametrize("path", TOP, ids=lambda p: p.name)
def test_top_modules_run_as_modules(path):
    tree = _tree(path)
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert "main" in names
    assert '__name__ == "__main__"' in path.read_text()


@pytest.mark.parametrize("path", TOP, ids=lambda p: p.name)
def test_torch_models_live_in_reference(path):
    """A bench defines no ``nn.Module`` of its own."""
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ClassDef):
            bases = [ast.unparse(b) for b in node.bases]
            assert not any("Module" in b for b in bases), (node.name, bases)
