"""The package's layering (pyproject.toml's import-linter contracts, run
by ``lint-imports``): imports only point downward, and no import cycle
joins the modules of any package (``acyclic_siblings``), function-local
imports included; a function-local import states its reason."""

import ast
import os
import shutil
import subprocess
import sys

import grimp
import pytest

import keras_rnnlm

ROOT = os.path.join(os.path.dirname(__file__), "..")
PACKAGE = os.path.dirname(os.path.abspath(keras_rnnlm.__file__))


def test_import_linter_contracts_are_kept():
    exe = shutil.which("lint-imports") or os.path.join(
        os.path.dirname(sys.executable), "lint-imports"
    )
    if not os.path.exists(exe):
        pytest.skip("import-linter is not installed")
    p = subprocess.run(
        [exe, "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stdout + p.stderr


def test_evaluation_package_imports_only_its_lowest_module():
    """``keras_rnnlm.evaluation`` sits in no layer of the contract, and
    importing any of its modules runs it: it imports the static evaluator
    alone (below training), nothing of the modules above training."""
    graph = grimp.build_graph("keras_rnnlm", cache_dir=None)
    imported = graph.find_modules_directly_imported_by("keras_rnnlm.evaluation")
    assert imported == {"keras_rnnlm.evaluation.static"}


def _function_local_imports():
    """(path, line, text) of the first line of every group of consecutive
    imports inside a function body of the package when no line of the
    group carries a ``#`` comment (the reason the import is local)."""
    found = []
    for path in _package_sources():
        with open(path) as f:
            source = f.read()
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for body in _bodies(node):
                for group in _import_groups(body):
                    texts = [lines[g.lineno - 1] for g in group]
                    if not any("#" in t for t in texts):
                        rel = os.path.relpath(path, ROOT)
                        found.append((rel, group[0].lineno, texts[0].strip()))
    return sorted(set(found))


def _package_sources():
    """The paths of the package's ``.py`` files (where it is imported
    from: ``src/keras_rnnlm``)."""
    paths = []
    for folder, _, files in os.walk(PACKAGE):
        paths += [os.path.join(folder, n) for n in files if n.endswith(".py")]
    return sorted(paths)


def _bodies(node):
    """Every statement list inside ``node`` (its body, branches, ...)."""
    for inner in ast.walk(node):
        for field in ("body", "orelse", "finalbody", "handlers"):
            stmts = getattr(inner, field, None)
            if isinstance(stmts, list) and stmts:
                yield stmts


def _import_groups(stmts):
    group = []
    for stmt in stmts:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            group.append(stmt)
            continue
        if group:
            yield group
        group = []
    if group:
        yield group


def test_the_local_import_check_reads_the_package():
    names = {os.path.relpath(p, PACKAGE) for p in _package_sources()}
    assert {"__init__.py", "runs.py", "evaluation/static.py"} <= names


def test_function_local_imports_carry_their_reason():
    """A function-local import stays only for a stated reason (a backend
    or an optional dependency loaded on use, start-up time), written on
    its line or its group's."""
    assert _function_local_imports() == []
