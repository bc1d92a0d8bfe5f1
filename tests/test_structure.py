"""The floor plan, checked from the source (lazy imports inside functions included), one rule
per folder: imports only go down, from the library (``ingest/``) to ``fusefs/view/`` to the
front ends (``fusefs/mount/``, ``fusefs/agent/``, ``fusefs/cli/``), which never import one
another except ``cli``, the console script, which imports the rest; only ``fusefs/mount/``
imports a FUSE binding, only ``fusefs/cli/`` imports click and only
``ingest/embedding/torchmodel.py`` imports torch, transformers or sentence-transformers;
every ``SemfsError`` subclass
is defined in ``ingest/errors.py``. Besides: no import cycles; the store interface imports no
backend; the store layer imports nothing of the pipeline, search or formats; formats import
nothing else of semfs; the agent tools reach no FUSE binding; every first-party import goes
through the one ``semfs`` namespace; fusefs never asks a store for its class; tests import
their helpers as ``tests.helpers``, never ``conftest``; and a test module that starts
``semfs mount`` marks those tests ``mount``.

Each rule is a function of the source it is given (``_*_violations``), so each is also
checked against a planted violation: a rule that cannot fail is no rule."""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest

from tests.helpers import REPO

# Repository folder -> the import package it installs as (pyproject's [tool.setuptools]).
FOLDERS = {"ingest": "semfs.ingest", "fusefs": "semfs.fusefs"}
# ... and the front door, `import semfs`: its __init__ is kept in this folder (package-dir).
FRONT_DOOR = ("ingest", "front")
FRONT_PACKAGE = "semfs"
FUSE_BINDINGS = frozenset({"mfusepy", "fuse", "fusepy"})


def _files(root: Path = REPO) -> list[Path]:
    return [p for folder in FOLDERS for p in sorted((root / folder).rglob("*.py"))]


def _module_name(path: Path, root: Path = REPO) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    if parts[: len(FRONT_DOOR)] == FRONT_DOOR:
        parts = (FRONT_PACKAGE, *parts[len(FRONT_DOOR) :])
    else:
        parts = (*FOLDERS[parts[0]].split("."), *parts[1:])
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _all_imports(path: Path, root: Path = REPO) -> set[str]:
    """Every module ``path`` imports anywhere in its body, at top level or lazily."""
    name = _module_name(path, root)
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


def _graph(root: Path = REPO) -> dict[str, set[str]]:
    modules = {_module_name(p, root): p for p in _files(root)}
    return {
        name: {m for m in _all_imports(path, root) if m in modules and m != name}
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
    for folder in FOLDERS:
        for init in (REPO / folder).rglob("__init__.py"):
            dotted = _module_name(init)
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


# --- the floor plan: one rule per folder -----------------------------------------------------

# Each folder of the plan, and what of semfs it never imports: imports only go down, from the
# library to the view to the front ends; of the front ends only cli (the console script, which
# offers every command) imports the others. A module in no folder here fails the first rule:
# a new folder gets its rule when it is made.
NEVER_IMPORTS = {
    "semfs.ingest": ("semfs.fusefs",),
    "semfs.fusefs.view": ("semfs.fusefs.mount", "semfs.fusefs.agent", "semfs.fusefs.cli"),
    "semfs.fusefs.mount": ("semfs.fusefs.agent", "semfs.fusefs.cli"),
    "semfs.fusefs.agent": ("semfs.fusefs.mount", "semfs.fusefs.cli"),
    "semfs.fusefs.cli": (),
}
# Third-party packages that one folder (or module) only imports: the kernel mount, the command
# line, and torch (the [torch] extra: the default install has none, and the default model's
# path, from ingest to search, must not need it; test_query_embedding.py runs that path with
# `-X importtime` and finds neither torch nor this module).
TORCH_LIBRARIES = frozenset({"torch", "transformers", "sentence_transformers"})
ONLY_IMPORTED_BY = {
    "semfs.fusefs.mount": FUSE_BINDINGS,
    "semfs.fusefs.cli": frozenset({"click"}),
    "semfs.ingest.embedding.torchmodel": TORCH_LIBRARIES,
}
ERRORS_MODULE = "semfs.ingest.errors"


def _folder(module: str) -> str | None:
    """The innermost folder of the plan that holds ``module`` (None: the fusefs package).
    The front door is the library's: it keeps the library's rule."""
    if module == FRONT_PACKAGE:
        return "semfs.ingest"
    return max((f for f in NEVER_IMPORTS if _under(module, f)), key=len, default=None)


def _upward_imports(root: Path = REPO) -> list[str]:
    found = []
    for path in _files(root):
        module = _module_name(path, root)
        folder = _folder(module)
        if folder is None:
            if module != "semfs.fusefs":  # the package's docstring, nothing else
                found.append(f"{module} is in no folder of the floor plan")
            continue
        banned = NEVER_IMPORTS[folder]
        found += [
            f"{module} imports {dep}"
            for dep in sorted(_all_imports(path, root))
            if any(_under(dep, b) for b in banned)
        ]
    return found


def _misplaced_libraries(root: Path = REPO) -> list[str]:
    found = []
    for path in _files(root):
        module = _module_name(path, root)
        tops = {x.split(".")[0] for x in _all_imports(path, root)}
        for folder, libraries in ONLY_IMPORTED_BY.items():
            if not _under(module, folder):
                found += [f"{module} imports {lib}" for lib in sorted(tops & libraries)]
    return found


def _errors_defined_elsewhere(root: Path = REPO) -> list[str]:
    # By name through the bases, across modules: a subclass of a subclass counts too.
    classes = [
        (_module_name(path, root), node.name, {ast.unparse(b).split(".")[-1] for b in node.bases})
        for path in _files(root)
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.ClassDef)
    ]
    errors = {"SemfsError"}
    while grown := {name for _, name, bases in classes if bases & errors} - errors:
        errors |= grown
    return sorted(
        f"{module}.{name}"
        for module, name, bases in classes
        if bases & errors and module != ERRORS_MODULE
    )


def test_imports_only_go_down() -> None:
    assert _upward_imports() == []


def test_only_mount_imports_a_fuse_binding_and_only_cli_imports_click() -> None:
    assert _misplaced_libraries() == []


def test_every_error_class_is_defined_in_errors() -> None:
    # The owner's socket rebuilds an error by its class name in errors.py: one defined
    # elsewhere would cross it as its nearest base there.
    assert _errors_defined_elsewhere() == []


def test_the_store_interface_imports_no_backend() -> None:
    # The manifest is a data format (like the schema), not a backend.
    assert _graph()["semfs.ingest.store"] <= {
        "semfs.ingest.errors",
        "semfs.ingest.store.manifest",
        "semfs.ingest.store.schema",
    }


def test_the_store_layer_imports_nothing_of_the_pipeline() -> None:
    # store/ is below everything: sources, chunking, embedding, search and formats build on it.
    allowed = {"semfs.ingest", "semfs.ingest.errors", PLATFORM_MODULE}
    leaks = {
        m: sorted(x for x in d if not _under(x, "semfs.ingest.store") and x not in allowed)
        for m, d in _graph().items()
        if _under(m, "semfs.ingest.store")
    }
    assert {m: d for m, d in leaks.items() if d} == {}


EDGE_PACKAGE = "semfs.ingest.store.edge"
# The one module outside the embedded engine's folder that imports it: the backends table.
EDGE_DOOR = "semfs.ingest.store.backends"


def _edge_reached_from_outside(root: Path = REPO) -> list[str]:
    return [
        f"{module} imports {dep}"
        for path in _files(root)
        for module in [_module_name(path, root)]
        if not _under(module, EDGE_PACKAGE) and module != EDGE_DOOR
        for dep in sorted(_all_imports(path, root))
        if _under(dep, EDGE_PACKAGE)
    ]


# The BM25 model is Qdrant Edge's for every backend (the server stores the vectors semfs
# makes): it has one home beside the engine, and nothing else names the engine's library.
BM25_MODULE = "semfs.ingest.store.bm25"


def _engine_library_elsewhere(root: Path = REPO) -> list[str]:
    return [
        module
        for path in _files(root)
        for module in [_module_name(path, root)]
        if not _under(module, EDGE_PACKAGE) and module != BM25_MODULE
        if any(_under(dep, "qdrant_edge") for dep in _all_imports(path, root))
    ]


def test_only_the_embedded_engine_and_bm25_import_qdrant_edge() -> None:
    assert _engine_library_elsewhere() == []


def test_only_the_backends_table_reaches_the_embedded_engine() -> None:
    # store/edge/ is one backend's own: everything else picks a backend through BACKENDS, so a
    # second backend is added beside it, not threaded through its callers.
    assert _edge_reached_from_outside() == []


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


# --- one portable module ---------------------------------------------------------------------

PLATFORM_MODULE = "semfs.ingest.portable"
# What only Linux has, or asks which system this is: the portable module holds each such call,
# its macOS way beside it (issue 33). Comments and docstrings count: a grep for these finds
# the portable module, its tests and the docs only. "Linux" in prose is fine; `linux` is the
# name sys.platform and paths use.
LINUX_ONLY = re.compile(
    r"/proc\b|SO_PEERCRED|fusermount|renameat2|\bO_PATH\b|linux|sys\.platform|posix_fadvise"
    r"|O_NOATIME|\bprctl\b|os\.(get|set|list|remove)xattr\b"
)


def _platform_calls_elsewhere(root: Path = REPO) -> list[str]:
    return [
        f"{path.relative_to(root)}:{n}: {m.group(0)}"
        for path in _files(root)
        if _module_name(path, root) != PLATFORM_MODULE
        for n, line in enumerate(path.read_text().splitlines(), 1)
        for m in [LINUX_ONLY.search(line)]
        if m
    ]


def test_only_the_platform_module_makes_linux_only_calls() -> None:
    assert _platform_calls_elsewhere() == []


# POSIX modules a system may lack or spell otherwise (RUSAGE_THREAD is Linux's): only the
# portable module imports them at its top; another module's import (the extraction worker's
# child, which imports nothing of semfs) is inside the function that needs it.
SYSTEM_MODULES = frozenset({"fcntl", "resource"})


def _system_modules_elsewhere(root: Path = REPO) -> list[str]:
    return [
        f"{_module_name(path, root)} imports {alias.name}"
        for path in _files(root)
        if _module_name(path, root) != PLATFORM_MODULE
        for node in ast.parse(path.read_text(), str(path)).body
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name in SYSTEM_MODULES
    ]


def test_only_the_platform_module_imports_fcntl_and_resource_at_its_top() -> None:
    assert _system_modules_elsewhere() == []


def test_the_platform_module_imports_nothing_of_semfs() -> None:
    # It sits below the store layer, which imports it (the owner's socket checks its peer).
    assert _graph()[PLATFORM_MODULE] == set()


# --- the tests' own rules --------------------------------------------------------------------

# `conftest` imported as a module is a second copy of it beside the one pytest loads (its
# fixtures registered twice, its globals split); code in strings too, as above.
_CONFTEST_IMPORT = re.compile(r"(^\s*|[\"'])(from|import)\s+([\w.]*\.)?conftest\b", re.M)
# What starts a real mount in a test: the helpers that run `semfs mount`, or running it.
_MOUNT_HELPERS = frozenset({"mounted", "wait_mounted"})


def _test_files(root: Path = REPO) -> list[Path]:
    return sorted(p for p in (root / "tests").rglob("*.py") if "corpus" not in p.parts)


def _conftest_imports(root: Path = REPO) -> list[str]:
    roots = [root / "tests", root / "scripts"]
    return [
        str(p.relative_to(root))
        for r in roots
        for p in sorted(r.rglob("*.py"))
        if p != Path(__file__) and _CONFTEST_IMPORT.search(p.read_text())
    ]


def _marks_mount(decorators: list[ast.expr]) -> bool:
    return any(re.search(r"\bmark\.mount\b", ast.unparse(d)) for d in decorators)


def _starts_a_mount(node: ast.AST) -> bool:
    """Whether ``node``'s own code starts `semfs mount` (not through a function it calls);
    `semfs mount --help` mounts nothing."""

    def words(args: list[ast.expr]) -> list[object]:
        return [a.value if isinstance(a, ast.Constant) else None for a in args]

    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            func = ast.unparse(sub.func).split(".")[-1]
            if func in _MOUNT_HELPERS:
                return True
            # semfs("mount", ...), _semfs("mount", ...): the command as the first argument
            said = words(sub.args)
            if func.endswith("semfs") and said[:1] == ["mount"] and "--help" not in said:
                return True
        if isinstance(sub, ast.List | ast.Tuple) and len(sub.elts) > 1:
            # [SEMFS, "mount", ...]: the console script run directly
            said = words(sub.elts)
            if "SEMFS" in ast.unparse(sub.elts[0]) and said[1] == "mount" and "--help" not in said:
                return True
    return False


def _unmarked_mounts(path: Path) -> list[str]:
    """The tests in ``path`` that start `semfs mount` themselves or through a function or
    fixture of the same module, and carry no ``mount`` marker (theirs or the module's)."""
    tree = ast.parse(path.read_text(), str(path))
    module_marked = any(
        isinstance(node, ast.Assign)
        and any(ast.unparse(t) == "pytestmark" for t in node.targets)
        and re.search(r"\bmark\.mount\b", ast.unparse(node.value))
        for node in tree.body
    )
    functions = {
        node.name: node
        for top in tree.body
        for node in (top.body if isinstance(top, ast.ClassDef) else [top])
        if isinstance(node, ast.FunctionDef)
    }
    mounting = {name for name, f in functions.items() if _starts_a_mount(f)}
    while True:  # through the module's functions it calls and fixtures it asks for
        grown = {
            name
            for name, f in functions.items()
            if name not in mounting
            and (
                {a.arg for a in f.args.args} & mounting
                or any(
                    isinstance(c, ast.Call) and ast.unparse(c.func) in mounting for c in ast.walk(f)
                )
            )
        }
        if not grown:
            break
        mounting |= grown
    return [
        f"{path.name}::{name}"
        for name in sorted(mounting)
        if name.startswith("test")
        and not module_marked
        and not _marks_mount(functions[name].decorator_list)
    ]


def test_tests_import_their_helpers_as_a_package() -> None:
    assert _conftest_imports() == []


def test_every_test_that_mounts_is_marked_mount() -> None:
    # So `pytest -m "not mount"` runs where there is no FUSE. A test that mounts through a
    # helper unmarked also fails at once (see the conftest's pytest_runtest_setup); this
    # catches the ones that run `semfs mount` themselves.
    found = [hit for path in _test_files() for hit in _unmarked_mounts(path)]
    assert found == []


# --- each rule fails on a planted violation --------------------------------------------------

_PLANTED = "\n\ndef _planted() -> None:\n    {line}\n"


def _copy_with(tmp_path: Path, relative: str, text: str) -> Path:
    """A copy of the package folders with ``text`` added to ``relative`` (made if new); a
    planted test counts what the rule finds there beyond what it finds in the real tree."""
    for folder in FOLDERS:
        shutil.copytree(REPO / folder, tmp_path / folder, ignore=shutil.ignore_patterns("*.pyc"))
    target = tmp_path / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("a") as f:
        f.write(text)
    return tmp_path


@pytest.mark.parametrize(
    ("relative", "line", "expected"),
    [
        ("ingest/pipeline.py", "from semfs.fusefs.view import tree", "semfs.ingest.pipeline"),
        ("ingest/store/__init__.py", "import semfs.fusefs.cli", "semfs.ingest.store"),
        ("fusefs/view/tree.py", "from semfs.fusefs.mount import ops", "semfs.fusefs.view.tree"),
        ("fusefs/mount/ops.py", "from semfs.fusefs.cli import cli", "semfs.fusefs.mount.ops"),
        ("fusefs/mount/ops.py", "from semfs.fusefs.agent import grep", "semfs.fusefs.mount.ops"),
        ("fusefs/agent/grep.py", "from ...fusefs.mount import ops", "semfs.fusefs.agent.grep"),
        ("fusefs/agent/grep.py", "from semfs.fusefs import cli", "semfs.fusefs.agent.grep"),
        ("fusefs/newfolder/x.py", "pass", "semfs.fusefs.newfolder.x is in no folder"),
        ("ingest/front/__init__.py", "import semfs.fusefs.cli", "semfs imports"),
    ],
)
def test_the_import_rule_fails_on_a_planted_violation(
    tmp_path: Path, relative: str, line: str, expected: str
) -> None:
    root = _copy_with(tmp_path, relative, _PLANTED.format(line=line))
    found = set(_upward_imports(root)) - set(_upward_imports())
    assert found and all(f.startswith(expected) for f in found), found


@pytest.mark.parametrize(
    ("relative", "line"),
    [
        ("fusefs/view/tree.py", "import mfusepy"),
        ("fusefs/agent/mcp.py", "from fuse import FUSE"),
        ("ingest/store/owner.py", "import click"),
        ("fusefs/mount/daemon.py", "import click"),
        ("ingest/embedding/onnx.py", "import torch"),
        ("ingest/embedding/embedder.py", "from sentence_transformers import SentenceTransformer"),
        ("ingest/embedding/bert.py", "from transformers import AutoModel"),
    ],
)
def test_the_library_rule_fails_on_a_planted_violation(
    tmp_path: Path, relative: str, line: str
) -> None:
    root = _copy_with(tmp_path, relative, _PLANTED.format(line=line))
    assert len(set(_misplaced_libraries(root)) - set(_misplaced_libraries())) == 1


@pytest.mark.parametrize(
    "planted",
    [
        "class LostError(SemfsError):\n    pass\n",
        "class LostError(errors.StoreLockedError):\n    pass\n",
        "class LostError(StoreOwnedError):\n    pass\n",
    ],
)
def test_the_error_rule_fails_on_a_planted_violation(tmp_path: Path, planted: str) -> None:
    root = _copy_with(tmp_path, "fusefs/view/tree.py", "\n\n" + planted)
    found = set(_errors_defined_elsewhere(root)) - set(_errors_defined_elsewhere())
    assert found == {"semfs.fusefs.view.tree.LostError"}


@pytest.mark.parametrize(
    "relative", ["ingest/pipeline.py", "ingest/search/excerpts.py", "ingest/store/qdrant.py"]
)
def test_the_engine_library_rule_fails_on_a_planted_violation(
    tmp_path: Path, relative: str
) -> None:
    root = _copy_with(tmp_path, relative, _PLANTED.format(line="import qdrant_edge as qe"))
    found = set(_engine_library_elsewhere(root)) - set(_engine_library_elsewhere())
    assert found == {_module_name(root / relative, root)}


@pytest.mark.parametrize(
    ("relative", "line"),
    [
        ("ingest/pipeline.py", "from semfs.ingest.store.edge.store import EdgeStore"),
        ("ingest/store/qdrant.py", "from semfs.ingest.store.edge import shardlock"),
        ("fusefs/cli/maintenance.py", "import semfs.ingest.store.edge.catalog"),
    ],
)
def test_the_edge_rule_fails_on_a_planted_violation(
    tmp_path: Path, relative: str, line: str
) -> None:
    root = _copy_with(tmp_path, relative, _PLANTED.format(line=line))
    found = set(_edge_reached_from_outside(root)) - set(_edge_reached_from_outside())
    module = _module_name(root / relative, root)
    assert found and all(f.startswith(f"{module} imports {EDGE_PACKAGE}") for f in found), found


@pytest.mark.parametrize(
    ("relative", "line"),
    [
        ("fusefs/mount/ops.py", 'open("/proc/self/status")'),
        ("ingest/store/ipc/wire.py", "socket.SO_PEERCRED"),
        ("fusefs/view/tree.py", "os.O_PATH"),
        ("ingest/sources.py", 'sys.platform == "darwin"'),
        ("fusefs/cli/mount.py", 'os.getxattr("/m", "user.x")'),
        ("ingest/beneath.py", "libc.renameat2(1, b'a', 1, b'b', 1)"),
        ("fusefs/mount/unmount.py", '["fusermount3", "-u"]'),
    ],
)
def test_the_platform_rule_fails_on_a_planted_violation(
    tmp_path: Path, relative: str, line: str
) -> None:
    root = _copy_with(tmp_path, relative, _PLANTED.format(line=line))
    found = set(_platform_calls_elsewhere(root)) - set(_platform_calls_elsewhere())
    assert len(found) == 1 and next(iter(found)).startswith(relative), found


def test_the_system_modules_rule_fails_on_a_planted_violation(tmp_path: Path) -> None:
    root = _copy_with(tmp_path, "fusefs/mount/writes.py", "\nimport fcntl\n")
    found = set(_system_modules_elsewhere(root)) - set(_system_modules_elsewhere())
    assert found == {"semfs.fusefs.mount.writes imports fcntl"}


def test_the_conftest_rule_fails_on_a_planted_violation(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    tests = tmp_path / "tests" / "unit"
    tests.mkdir(parents=True)
    (tests / "test_a.py").write_text("from tests.conftest import store_dir\n")
    (tests / "test_b.py").write_text('CODE = "import conftest"\n')
    (tests / "test_c.py").write_text('"""Fixtures come from conftest.py."""\n')
    assert _conftest_imports(tmp_path) == ["tests/unit/test_a.py", "tests/unit/test_b.py"]


def test_the_mount_marker_rule_fails_on_a_planted_violation(tmp_path: Path) -> None:
    planted = tmp_path / "test_planted.py"
    planted.write_text(
        "import pytest\n"
        "from tests.helpers import SEMFS\n"
        "from tests.helpers.mounting import mounted, semfs\n\n"
        "@pytest.fixture\n"
        "def mnt(tmp_path):\n"
        "    with mounted(tmp_path / 'mnt') as m:\n"
        "        yield m\n\n"
        "def _start(path):\n"
        "    subprocess.run([SEMFS, 'mount', str(path)])\n\n"
        "def test_by_fixture(mnt):\n    pass\n\n"
        "def test_by_function(tmp_path):\n    _start(tmp_path)\n\n"
        "def test_by_command(tmp_path):\n    semfs('mount', str(tmp_path))\n\n"
        "@pytest.mark.mount\n"
        "def test_marked(mnt):\n    pass\n\n"
        "def test_help():\n    semfs('mount', '--help')\n"
    )
    assert _unmarked_mounts(planted) == [
        "test_planted.py::test_by_command",
        "test_planted.py::test_by_fixture",
        "test_planted.py::test_by_function",
    ]
    planted.write_text("import pytest\npytestmark = [pytest.mark.mount]\n" + planted.read_text())
    assert _unmarked_mounts(planted) == []


# A mode's behaviour is in its MODES row (issue 49): code asks the row, never the name.
_MODE_NAME_TEST = re.compile(
    r"""(==|!=|\bin\b)\s*[(\[{]?\s*["'](hybrid|semantic|keyword|symbol)["']"""
)


def _mode_name_tests(root: Path = REPO) -> list[str]:
    return [
        f"{p.relative_to(root)}:{n}"
        for p in _files(root)
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if _MODE_NAME_TEST.search(line.split("#", 1)[0])
    ]


def test_no_code_compares_a_mode_name() -> None:
    assert _mode_name_tests() == []


def test_the_mode_rule_fails_on_a_planted_violation(tmp_path: Path) -> None:
    planted = 'def f(mode: str) -> bool:\n    return mode == "keyword"\n'
    root = _copy_with(tmp_path, "ingest/search/excerpts.py", planted)
    found = set(_mode_name_tests(root)) - set(_mode_name_tests())
    assert len(found) == 1 and found.pop().startswith("ingest/search/excerpts.py:"), found


# One concern per module (issue 49): a module that outgrows this holds two.
MODULE_LINES = 800


def _too_long(rel: str, text: str) -> list[str]:
    n = len(text.splitlines())
    return [f"{rel}: {n} lines"] if n > MODULE_LINES else []


def test_no_module_is_over_800_lines() -> None:
    assert [h for p in _files() for h in _too_long(str(p.relative_to(REPO)), p.read_text())] == []


def test_the_module_size_rule_fails_on_a_planted_violation() -> None:
    text = (REPO / "ingest/labels.py").read_text()
    assert _too_long("ingest/labels.py", text) == []
    assert _too_long("ingest/labels.py", text + "\n" * MODULE_LINES) != []


# Capabilities are declared (issue 49): a backend's on its BACKENDS row, an owner's on the
# store's owner_link(). Nothing asks a store for its class, probes it for an attribute by name
# or tests an address's URL to decide what to do; only the table and the address parse a URL.
_STORE_CLASSES = r"(Store|StoreReader|StoreWriter|RemoteStore|EdgeStore|ServerStore|QdrantStore)"
_PROBE = re.compile(
    rf"isinstance\([^)]*\b{_STORE_CLASSES}\b"
    r"""|\b(getattr|hasattr)\([^,()]*store[^,()]*,\s*["']"""
    r"|\burl\s+is\s+(not\s+)?None|\burl\.startswith\("
)
# The backends table (which backend serves an address), the address itself, and the server
# backend's one test of whether its URL is qdrant-client's local mode.
_PARSE_URLS = frozenset(
    {"ingest/store/backends.py", "ingest/store/address.py", "ingest/store/server_store.py"}
)


def _probes_in(rel: str, text: str) -> list[str]:
    if rel in _PARSE_URLS:
        return []
    return [
        f"{rel}:{n}"
        for n, line in enumerate(text.splitlines(), 1)
        if _PROBE.search(line.split("#", 1)[0])
    ]


def test_no_store_is_asked_its_class_or_probed_for_an_attribute() -> None:
    assert [h for p in _files() for h in _probes_in(str(p.relative_to(REPO)), p.read_text())] == []


_PLANTED_PROBES = [
    "isinstance(store, RemoteStore)",
    'getattr(store, "owner_embeds", False)',
    'hasattr(self.store, "embed_query")',
    "address.url is not None",
    'self.url.startswith("file:")',
]


def test_the_probe_rule_fails_on_a_planted_violation() -> None:
    planted = "".join(_PLANTED.format(line=f"print({probe})") for probe in _PLANTED_PROBES)
    assert len(_probes_in("ingest/search/excerpts.py", planted)) == len(_PLANTED_PROBES)
    assert _probes_in("ingest/store/backends.py", planted) == []  # the table parses URLs


# Names with one meaning (issue 49, ARCHITECTURE.md): a `scope` is the folders an MCP token
# sees, so only the agent tools name anything so; an ingest's paths are `only`, a search's
# folder `under`.
SCOPE_FOLDER = "fusefs/agent/"
_SCOPE_NAME = re.compile(r"^(in_)?scope(_\w+)?$")


def _scope_names_in(rel: str, text: str) -> list[str]:
    if rel.startswith(SCOPE_FOLDER):
        return []
    found = []
    for node in ast.walk(ast.parse(text)):
        name = (
            getattr(node, "id", None)
            or (node.arg if isinstance(node, ast.arg | ast.keyword) else None)
            or (node.attr if isinstance(node, ast.Attribute) else None)
            or (node.name if isinstance(node, ast.FunctionDef | ast.ClassDef) else None)
        )
        if name and _SCOPE_NAME.match(name):
            found.append(f"{rel}:{getattr(node, 'lineno', 0)} {name}")
    return found


def test_only_the_agent_tools_name_a_scope() -> None:
    found = [
        hit for p in _files() for hit in _scope_names_in(str(p.relative_to(REPO)), p.read_text())
    ]
    assert found == []


def test_the_scope_rule_fails_on_a_planted_violation() -> None:
    planted = "def in_scope(path, scope):\n    return f(scope=scope).scope\n"
    assert len(_scope_names_in("ingest/pipeline.py", planted)) == 5
    assert _scope_names_in("fusefs/agent/toolbox.py", planted) == []
