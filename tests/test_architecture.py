"""The package's layers hold: each module imports only modules of its own layer or of the layers below, and no
modules import each other in a cycle. Imports made inside functions count as much as those at the top of a module.

    core (templates, scanning, content parsers, tools typing, token ids, limits, regex budget; and _version)
      < library (the shipped templates, lookup, entry validation)
      < integrations (transformers patching, OpenAI adapter, engine plugins, grammar)
      < authoring (rendering, verify, inference, engine checks, publishing)
      < cli
    and the root package, the façade, above them all: nothing inside the package imports it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import response_templates

PACKAGE = "response_templates"
LAYERS = ("core", "library", "integrations", "authoring", "cli")
LEAVES = {f"{PACKAGE}._version": 0}  # modules outside the layer folders, and their layer


def layer_of(module: str) -> int:
    """The rank of a module of the package (the root package ranks above every layer)."""
    if module == PACKAGE:
        return len(LAYERS)
    if module in LEAVES:
        return LEAVES[module]
    first = module.split(".")[1]
    if first not in LAYERS:
        raise AssertionError(f"{module} is in no layer: put it under one of {LAYERS} or list it in LEAVES")
    return LAYERS.index(first)


def package_modules(root: Path) -> dict[str, Path]:
    """Every module of the package under `root` by dotted name (a package by its own name, for its __init__)."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def imports_of(module: str, path: Path, known: set[str]) -> set[str]:
    """The modules of the package that `module` imports anywhere in its source (`from X import name` counts X.name
    when that is a module, else X)."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                if not is_package:
                    base = base[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:  # `from . import scan` imports the module scan, not just the package
                submodule = f"{target}.{alias.name}"
                found.add(submodule if submodule in known else target)
    return {name for name in found if name in known and name != module}


def import_graph(root: Path) -> dict[str, set[str]]:
    modules = package_modules(root)
    return {name: imports_of(name, path, set(modules)) for name, path in modules.items()}


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    problems = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            if target == PACKAGE and module != PACKAGE:
                problems.append(f"{module} imports the root package (import from the module that defines the name)")
            elif layer_of(target) > layer_of(module):
                problems.append(f"{module} ({LAYERS[layer_of(module)]}) imports {target}, a layer above it")
    return problems


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


ROOT = Path(response_templates.__file__).resolve().parent


def test_every_module_imports_only_its_layer_and_those_below():
    assert layer_violations(import_graph(ROOT)) == []


def test_no_import_cycles():
    assert cycles(import_graph(ROOT)) == []


def test_the_core_imports_nothing_else_of_the_package():
    graph = import_graph(ROOT)
    core = {name for name in graph if name.startswith(f"{PACKAGE}.core")}
    assert core, "no core modules found"
    outside = {(name, target) for name in core for target in graph[name]
               if not target.startswith(f"{PACKAGE}.core") and target not in LEAVES}
    assert outside == set()


def test_the_checks_catch_an_upward_import_and_a_cycle(tmp_path):
    """The checks above would fail on a package that breaks the rules (a function-level import included)."""
    package = tmp_path / PACKAGE
    for folder in ("core", "library", "cli"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    (package / "__init__.py").write_text("from .core import a\n")
    (package / "core" / "a.py").write_text("def f():\n    from ..library import b\n")
    (package / "library" / "b.py").write_text("from ..core import a\n")
    (package / "cli" / "c.py").write_text("from .. import helper\nfrom response_templates import library\n")
    graph = import_graph(package)
    problems = layer_violations(graph)
    assert any("response_templates.core.a (core) imports response_templates.library" in p for p in problems)
    assert any(p.startswith("response_templates.cli.c imports the root package") for p in problems)
    assert cycles(graph) == [["response_templates.core.a", "response_templates.library.b"]]


def test_a_module_outside_the_layers_is_reported(tmp_path):
    with pytest.raises(AssertionError, match="is in no layer"):
        layer_of(f"{PACKAGE}.stray")
