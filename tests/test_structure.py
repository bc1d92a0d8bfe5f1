"""The layering the code relies on, checked from the source (lazy imports inside functions
included): no import cycles; ingest never imports fusefs; the store interface imports no
backend; the store layer imports nothing of the pipeline, search or formats; formats import
nothing else of semfs; the agent tools reach no FUSE binding; every first-party import goes
through the one ``semfs`` namespace; and fusefs never asks a store for its class."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.helpers import REPO

# Repository folder -> the import package it installs as (pyproject's [tool.setuptools]).
FOLDERS = {"ingest": "semfs.ingest", "fusefs": "semfs.fusefs"}
FUSE_BINDINGS = {"mfusepy", "fuse", "fusepy"}


def _files() -> list[Path]:
    return [p for folder in FOLDERS for p in sorted((REPO / folder).rglob("*.py"))]


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    parts = (*FOLDERS[parts[0]].split("."), *parts[1:])
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _all_imports(path: Path) -> set[str]:
    """Every module ``path`` imports anywhere in its body, at top level or lazily."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in _files()}
    return {
        name: {m for m in _all_imports(path) if m in modules and m != name}
        for name, path in modules.items()
    }


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for dep in graph[todo.pop()]:
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def _under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_every_folder_is_an_installed_package() -> None:
    # A folder without __init__.py would be left out of the wheel ([tool.setuptools] lists
    # packages), and one not listed there is not installed: both break only outside the repo.
    pyproject = (REPO / "pyproject.toml").read_text()
    for folder, package in FOLDERS.items():
        for init in (REPO / folder).rglob("__init__.py"):
            dotted = ".".join((package, *init.parent.relative_to(REPO / folder).parts))
            assert f'"{dotted}"' in pyproject, f"{dotted} is not in pyproject's packages"
        for sub in (REPO / folder).rglob("*.py"):
            assert (sub.parent / "__init__.py").exists(), f"{sub.parent} has no __init__.py"


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
    assert cycles == [], " ; ".join(" -> ".join(c) for c in cycles)


def test_ingest_never_imports_fusefs() -> None:
    graph = _graph()
    leaks = {
        m: sorted(d)
        for m, d in graph.items()
        if _under(m, "semfs.ingest") and any(_under(x, "semfs.fusefs") for x in d)
    }
    assert leaks == {}


def test_the_store_interface_imports_no_backend() -> None:
    # The manifest is a data format (like the schema), not a backend.
    assert _graph()["semfs.ingest.store"] <= {
        "semfs.ingest.errors",
        "semfs.ingest.store.manifest",
        "semfs.ingest.store.schema",
    }


def test_the_store_layer_imports_nothing_of_the_pipeline() -> None:
    # store/ is below everything: sources, chunking, embedding, search and formats build on it.
    allowed = {"semfs.ingest", "semfs.ingest.errors"}
    leaks = {
        m: sorted(x for x in d if not _under(x, "semfs.ingest.store") and x not in allowed)
        for m, d in _graph().items()
        if _under(m, "semfs.ingest.store")
    }
    assert {m: d for m, d in leaks.items() if d} == {}


def test_search_reads_the_store_and_never_writes_through_the_pipeline() -> None:
    forbidden = ("pipeline", "sources", "chunking", "watch", "syncstate", "cli", "formats")
    leaks = {
        m: sorted(x for x in d if any(_under(x, f"semfs.ingest.{f}") for f in forbidden))
        for m, d in _graph().items()
        if _under(m, "semfs.ingest.search")
    }
    assert {m: d for m, d in leaks.items() if d} == {}


def test_formats_import_nothing_else_of_semfs() -> None:
    # An extractor is a function of a file's bytes: testable and reusable on its own.
    leaks = {
        m: sorted(x for x in d if not _under(x, "semfs.ingest.formats"))
        for m, d in _graph().items()
        if _under(m, "semfs.ingest.formats")
    }
    assert {m: d for m, d in leaks.items() if d} == {}


def test_the_agent_tools_reach_no_fuse_binding() -> None:
    # toolbox, mcp, grep and guide serve agents without a mount: nothing they import, directly
    # or through other modules, may load the FUSE library or the mount's callbacks.
    graph = _graph()
    files = {_module_name(p): p for p in _files()}
    mount_only = {
        "semfs.fusefs.mount.bindings",
        "semfs.fusefs.mount.ops",
        "semfs.fusefs.mount.daemon",
        "semfs.fusefs.mount.start",
        "semfs.fusefs.mount.unmount",
    }
    for module in (m for m in graph if _under(m, "semfs.fusefs.agent")):
        reached = _reach(graph, module) | {module}
        assert not reached & mount_only, (module, sorted(reached & mount_only))
        external = {x.split(".")[0] for r in reached for x in _all_imports(files[r])}
        assert not external & FUSE_BINDINGS, (module, sorted(external & FUSE_BINDINGS))


def test_first_party_imports_go_through_the_semfs_namespace() -> None:
    # `import ingest` works from the repository root only (the folder is on sys.path there):
    # such an import would load a second copy of a module beside its `semfs.` twin.
    # Code in strings too (a test's `python -c` program): start of a line or of a string.
    pattern = re.compile(r"(^\s*|[\"'])(from|import)\s+(ingest|fusefs)\b", re.M)
    roots = [*FOLDERS, "tests", "scripts"]
    hits = [
        str(p.relative_to(REPO))
        for root in roots
        for p in sorted((REPO / root).rglob("*.py"))
        if "corpus" not in p.parts and pattern.search(p.read_text())
    ]
    assert hits == []


def test_fusefs_never_asks_a_store_for_its_class() -> None:
    pattern = re.compile(r"isinstance\(.*Store")
    hits = [
        f"{p.name}:{n}"
        for p in sorted((REPO / "fusefs").rglob("*.py"))
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert hits == []
