"""Every recipe file has one shape: a docstring, presets as data and one
call into the package under ``if __name__ == "__main__"``."""

import ast
import glob
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
RECIPES = sorted(glob.glob(os.path.join(ROOT, "recipes", "*.py")))
TRAINING = [p for p in RECIPES if not os.path.basename(p).startswith("tune_")]


def _tree(path):
    with open(path) as f:
        return ast.parse(f.read(), path)


def _main_block(tree):
    for node in tree.body:
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            return node
    return None


def test_recipes_found():
    assert len(TRAINING) >= 10 and len(RECIPES) > len(TRAINING)


@pytest.mark.parametrize("path", RECIPES, ids=os.path.basename)
def test_no_argparse_and_no_module_level_loops(path):
    with open(path) as f:
        assert "argparse" not in f.read()
    tree = _tree(path)
    assert ast.get_docstring(tree), "a recipe starts with its docstring"
    for node in tree.body:
        assert not isinstance(node, (ast.For, ast.While, ast.AsyncFor)), (
            f"line {node.lineno}: a loop at module level"
        )
        assert not isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        ), f"line {node.lineno}: recipes define data, not code"


@pytest.mark.parametrize("path", RECIPES, ids=os.path.basename)
def test_one_call_under_main(path):
    main = _main_block(_tree(path))
    assert main is not None and len(main.body) == 1
    (stmt,) = main.body
    assert isinstance(stmt, ast.Raise)  # raise SystemExit(<entry>(...))
    call = stmt.exc
    assert isinstance(call, ast.Call) and ast.unparse(call.func) == "SystemExit"
    (entry,) = call.args
    assert isinstance(entry, ast.Call)
    name = ast.unparse(entry.func)
    if path in TRAINING:
        assert name == "recipe_main"


@pytest.mark.parametrize("path", TRAINING, ids=os.path.basename)
def test_training_recipe_defines_presets(path):
    tree = _tree(path)
    assigned = {
        name.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        for name in ast.walk(target)
        if isinstance(name, ast.Name)
    }
    assert {"PRESETS", "DEFAULT_PRESET"} <= assigned
    imports = [
        node
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        and (node.module or "").startswith("keras_rnnlm")
    ]
    # keras_rnnlm.cli quiets TensorFlow's start-up before Keras loads.
    assert imports[0].module == "keras_rnnlm.cli"
    assert [a.name for a in imports[0].names] == ["recipe_main"]
