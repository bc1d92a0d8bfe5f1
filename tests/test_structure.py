"""The layering the code relies on, checked from the source: no import cycles (lazy imports
inside functions included), ingest never imports fusefs, the store interface imports no
backend, and fusefs never asks a store for its class."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import REPO

PACKAGES = ("ingest", "fusefs")


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """The package modules ``path`` imports anywhere in its body, at top level or lazily."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1]])
                base = f"{base}.{node.module}" if node.module else base
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {m for m in found if m.split(".")[0] in PACKAGES}


def _graph() -> dict[str, set[str]]:
    files = [p for pkg in PACKAGES for p in sorted((REPO / pkg).glob("*.py"))]
    modules = {_module_name(p): p for p in files}
    return {
        name: {m for m in _imports(path) if m in modules and m != name}
        for name, path in modules.items()
    }


def test_no_import_cycles() -> None:
    graph = _graph()
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycles.append([*path[path.index(dep) :], dep])
            elif dep not in state:
                visit(dep, [*path, dep])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    # A package __init__ importing nothing keeps "ingest -> ingest.x -> ingest" out.
    assert cycles == [], " ; ".join(" -> ".join(c) for c in cycles)


def test_ingest_never_imports_fusefs() -> None:
    graph = _graph()
    leaks = {m: d for m, d in graph.items() if m.startswith("ingest") for x in d if "fusefs" in x}
    assert leaks == {}


def test_the_store_interface_imports_no_backend() -> None:
    # ingest.manifest is a data format (like schema), not a backend.
    assert _graph()["ingest.store"] <= {"ingest.errors", "ingest.manifest", "ingest.schema"}


def test_fusefs_never_asks_a_store_for_its_class() -> None:
    pattern = re.compile(r"isinstance\(.*Store")
    hits = [
        f"{p.name}:{n}"
        for p in sorted((REPO / "fusefs").glob("*.py"))
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert hits == []
