"""Source code's definitions, by tree-sitter: where each function, method, class (or config
key) starts and ends, what it is called, and where a long one may be cut.

The chunker (:mod:`semfs.ingest.chunking`) cuts source files at these definitions and labels
each chunk with the definitions around it (``class Uploader > def retry_upload``); search
shows the label and the signature line of the definition an answer sits in.

Rules a caller may rely on:

* :func:`language_of` names the grammar for a path by its suffix (:data:`LANGUAGES`), or by
  a ``#!`` line for a file without one, else None. It imports nothing: a mount never loads a
  parser.
* :func:`outline` parses the text with that grammar and returns its :class:`Outline`: every
  definition with 0-based line numbers (its first line includes the comments, decorators
  and attributes directly above it), its label parts, its names for a lookup by name, and
  the lines where a statement of a definition's body (or of the file's top level) starts,
  the places a long definition is best cut. None when the grammar is not installed: the
  caller chunks the file as plain code.
* Only lines matter: a definition that does not start its line (``x = class {...}``) is
  labelled but is no place to cut. Parsing never fails (tree-sitter builds a tree of any
  text, with error nodes where it must), and never changes the text.
* Grammars are the ``tree-sitter-LANGUAGE`` wheels (each MIT), loaded on first use and kept,
  one parser and one query per language.
"""

from __future__ import annotations

import importlib
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

__all__ = ["LANGUAGES", "Definition", "Outline", "language_of", "outline"]


@dataclass(frozen=True)
class Grammar:
    """A language: the wheel and function that give its grammar, the query that finds its
    definitions (``@def.KIND`` on the definition, ``@name`` on its name), and the node types
    that wrap a definition (a decorator list, ``export``) or precede it as its preamble."""

    module: str
    function: str
    query: str
    wrappers: frozenset[str] = frozenset()
    preamble: frozenset[str] = frozenset({"comment"})
    # Configuration formats: a key is a definition only where its value spans lines.
    config: bool = False


_PY = """
(function_definition name: (identifier) @name) @def.def
(class_definition name: (identifier) @name) @def.class
"""
_JS = """
(function_declaration name: (identifier) @name) @def.function
(generator_function_declaration name: (identifier) @name) @def.function
(class_declaration name: (_) @name) @def.class
(method_definition name: (_) @name) @def.method
(variable_declarator name: (identifier) @name
  value: [(arrow_function) (function_expression) (generator_function)]) @def.method
"""
_TS = (
    _JS
    + """
(abstract_class_declaration name: (_) @name) @def.class
(interface_declaration name: (_) @name) @def.interface
(type_alias_declaration name: (_) @name) @def.type
(enum_declaration name: (_) @name) @def.enum
(internal_module name: (_) @name) @def.namespace
(function_signature name: (_) @name) @def.function
(method_signature name: (_) @name) @def.method
(abstract_method_signature name: (_) @name) @def.method
"""
)
_GO = """
(function_declaration name: (identifier) @name) @def.func
(method_declaration receiver: (parameter_list) @receiver name: (field_identifier) @name) @def.func
(type_spec name: (type_identifier) @name) @def.type
"""
_RUST = """
(function_item name: (identifier) @name) @def.fn
(function_signature_item name: (identifier) @name) @def.fn
(struct_item name: (type_identifier) @name) @def.struct
(enum_item name: (type_identifier) @name) @def.enum
(union_item name: (type_identifier) @name) @def.union
(trait_item name: (type_identifier) @name) @def.trait
(impl_item type: (_) @name) @def.impl
(mod_item name: (identifier) @name) @def.mod
(macro_definition name: (identifier) @name) @def.macro
(type_item name: (type_identifier) @name) @def.type
"""
_JAVA = """
(class_declaration name: (identifier) @name) @def.class
(interface_declaration name: (identifier) @name) @def.interface
(enum_declaration name: (identifier) @name) @def.enum
(record_declaration name: (identifier) @name) @def.record
(annotation_type_declaration name: (identifier) @name) @def.annotation
(method_declaration name: (identifier) @name) @def.method
(constructor_declaration name: (identifier) @name) @def.method
"""
_C = """
(function_definition declarator: (_) @name) @def.method
(struct_specifier name: (_) @name body: (_)) @def.struct
(union_specifier name: (_) @name body: (_)) @def.union
(enum_specifier name: (_) @name body: (_)) @def.enum
(type_definition declarator: (_) @name) @def.typedef
(preproc_function_def name: (identifier) @name) @def.define
"""
_CPP = (
    _C
    + """
(class_specifier name: (_) @name body: (_)) @def.class
(namespace_definition name: (_) @name) @def.namespace
"""
)
_BASH = """
(function_definition name: (word) @name) @def.method
"""
_YAML = """
(block_mapping_pair key: (_) @name) @def.key
"""
_TOML = """
(table (_) @name) @def.table
(table_array_element (_) @name) @def.array
"""
_JSON = """
(pair key: (_) @name) @def.key
"""
_COMMENTS = frozenset({"comment", "line_comment", "block_comment"})

# Suffix (lower case, with the dot) -> grammar. `.h` is read as C (most headers are), C++
# headers have their own suffixes.
_PYTHON = Grammar("tree_sitter_python", "language", _PY, frozenset({"decorated_definition"}))
_JAVASCRIPT = Grammar(
    "tree_sitter_javascript",
    "language",
    _JS,
    frozenset({"export_statement", "lexical_declaration", "variable_declaration"}),
    _COMMENTS | {"decorator"},
)
_TS_WRAPPERS = frozenset(
    {"export_statement", "lexical_declaration", "variable_declaration", "ambient_declaration"}
)
_TYPESCRIPT = Grammar(
    "tree_sitter_typescript", "language_typescript", _TS, _TS_WRAPPERS, _COMMENTS | {"decorator"}
)
_TSX = Grammar("tree_sitter_typescript", "language_tsx", _TS, _TS_WRAPPERS, _COMMENTS)
_CLIKE = _COMMENTS | {"preproc_call"}
LANGUAGES: dict[str, Grammar] = {
    ".py": _PYTHON,
    ".pyi": _PYTHON,
    ".js": _JAVASCRIPT,
    ".mjs": _JAVASCRIPT,
    ".cjs": _JAVASCRIPT,
    ".jsx": _JAVASCRIPT,
    ".ts": _TYPESCRIPT,
    ".mts": _TYPESCRIPT,
    ".cts": _TYPESCRIPT,
    ".tsx": _TSX,
    ".go": Grammar("tree_sitter_go", "language", _GO, frozenset({"type_declaration"})),
    ".rs": Grammar(
        "tree_sitter_rust",
        "language",
        _RUST,
        preamble=frozenset({"line_comment", "block_comment", "attribute_item"}),
    ),
    ".java": Grammar("tree_sitter_java", "language", _JAVA, preamble=_COMMENTS),
    ".c": Grammar("tree_sitter_c", "language", _C, preamble=_CLIKE),
    ".h": Grammar("tree_sitter_c", "language", _C, preamble=_CLIKE),
    **dict.fromkeys(
        (".cc", ".cpp", ".cxx", ".c++", ".hpp", ".hh", ".hxx", ".h++"),
        Grammar("tree_sitter_cpp", "language", _CPP, frozenset({"template_declaration"}), _CLIKE),
    ),
    **dict.fromkeys((".sh", ".bash"), Grammar("tree_sitter_bash", "language", _BASH)),
    ".yaml": Grammar("tree_sitter_yaml", "language", _YAML, config=True),
    ".yml": Grammar("tree_sitter_yaml", "language", _YAML, config=True),
    ".toml": Grammar("tree_sitter_toml", "language", _TOML, config=True),
    ".json": Grammar("tree_sitter_json", "language", _JSON, preamble=frozenset(), config=True),
}
# A file without a suffix is read by its ``#!`` line: scripts in bin/ are code too.
_SHEBANG = re.compile(
    r"#!\s*\S*?(?:/env\s+(?:-\S+\s+)*)?/?(?:\S*/)?(python|bash|sh|node)\d*(?:\.\d+)*\b"
)
_BY_INTERPRETER = {"python": ".py", "bash": ".sh", "sh": ".sh", "node": ".js"}
# A capture's kind as a label says it, where the two differ (a capture name is one word).
_KIND_WORDS = {"macro": "macro_rules!", "define": "#define", "annotation": "@interface"}
# Definitions deeper than this are labelled by their outer ones only.
MAX_DEPTH = 6
# Definitions are looked for this many nodes deep at most (a definition 6 deep in nested
# callbacks sits ~40 deep). A node's parent and siblings cost tree-sitter a walk down from the
# root: past this depth, JSON nested 20,000 deep took 45 s (issue 46), quadratic.
MAX_TREE_DEPTH = 128
# A file's outline may take this much CPU time, plus this much per MB: ~15 times what a
# linear outline of such a file takes here. Past it the file is chunked as plain code: a
# shape no one foresaw costs seconds, not hours (a 400 KB JSON took 164 s, under the
# watcher's write lock).
OUTLINE_CPU_S = 5.0
OUTLINE_CPU_S_PER_MB = 5.0


@dataclass(frozen=True)
class Definition:
    """One definition, lines 0-based: ``start`` its first line (its preamble's), ``line``
    the line its name is on (its signature), ``end`` its last line; ``label`` its part of
    a label (``def retry_upload``, ``class Uploader``, ``services``); ``names`` what a
    lookup by name finds it by (its name, then its qualified names); ``cut`` whether it
    starts its line (a place to cut)."""

    start: int
    line: int
    end: int
    label: str
    names: tuple[str, ...]
    cut: bool
    depth: int = 0
    parents: tuple[int, ...] = ()  # indexes of the enclosing definitions, outermost first
    # Bytes: where it starts (its preamble's line, else the definition itself) and ends,
    # and where its name is. The chunker places a definition in a chunk by them, so a
    # one-line file's chunk carries its own definitions, not the line's (issue 46).
    first_byte: int = 0
    end_byte: int = 0
    name_byte: int = 0


@dataclass
class Outline:
    """A file's definitions in its language (``"python"``), sorted by start, outer before
    inner, and the lines where a statement of a body or of the top level starts (0-based)."""

    language: str
    definitions: list[Definition] = field(default_factory=list)
    statements: set[int] = field(default_factory=set)

    def path(self, index: int) -> list[str]:
        """The label parts of definition ``index``, outermost first."""
        d = self.definitions[index]
        return [self.definitions[p].label for p in d.parents] + [d.label]


def language_of(path: str, first_line: str = "") -> str | None:
    """The suffix whose grammar reads ``path`` (``".py"``), or None. A file with no suffix
    is read by its ``#!`` line (``first_line``)."""
    pure = PurePath(path)
    suffix = pure.suffix.lower()
    if suffix in LANGUAGES:
        return suffix
    if not suffix and first_line.startswith("#!"):
        m = _SHEBANG.match(first_line)
        if m:
            return _BY_INTERPRETER[m.group(1)]
    return None


# Configuration formats' languages (``"json"``): read by a grammar, yet data, not a program.
CONFIG_LANGUAGES = frozenset(
    g.module.removeprefix("tree_sitter_") for g in LANGUAGES.values() if g.config
)


def is_program(language: str) -> bool:
    """Whether a chunk of ``language`` (a :class:`ChunkRecord`'s ``syntax``) is a program's
    source, not a configuration file's or prose (``""``): what code search's rules apply to."""
    return bool(language) and language not in CONFIG_LANGUAGES


_lock = threading.Lock()
# One (parser, query) per grammar, made on first use: at most len(set(LANGUAGES.values())).
_loaded: dict[Grammar, tuple[Any, Any] | None] = {}


def _load(grammar: Grammar) -> tuple[Any, Any] | None:
    with _lock:
        if grammar in _loaded:
            return _loaded[grammar]
        try:
            import tree_sitter

            module = importlib.import_module(grammar.module)
            language = tree_sitter.Language(getattr(module, grammar.function)())
            found: tuple[Any, Any] | None = (
                tree_sitter.Parser(language),
                tree_sitter.Query(language, grammar.query),
            )
        except (ImportError, AttributeError, ValueError, OSError):
            found = None  # no grammar here: the file is chunked as plain code
        _loaded[grammar] = found
        return found


def outline(text: str, path: str) -> Outline | None:
    """The definitions of ``text`` (the file at ``path``), or None when no grammar reads it."""
    first = text[: text.find("\n")] if "\n" in text else text
    suffix = language_of(path, first)
    if suffix is None:
        return None
    grammar = LANGUAGES[suffix]
    loaded = _load(grammar)
    if loaded is None:
        return None
    parser, query = loaded
    data = text.encode("utf-8", "surrogatepass")
    if grammar.module == "tree_sitter_yaml" and _yaml_depth(data) > MAX_YAML_DEPTH:
        return None  # its scanner crashes the process on a deep indent stack (~300 levels)
    budget = OUTLINE_CPU_S + OUTLINE_CPU_S_PER_MB * len(data) / 1e6
    deadline = time.thread_time() + budget
    with _lock:  # a Parser is not safe to share between threads
        tree = parser.parse(data)
    try:
        return _Reader(grammar, data, suffix, deadline).read(tree, query)
    except _OverBudget:
        return None


class _OverBudget(Exception):
    """An outline that took longer than its budget (see :data:`OUTLINE_CPU_S`)."""


# tree-sitter-yaml 0.7's scanner overruns its indent stack ~300 levels deep and takes the
# process down (SIGSEGV: an ingest, a mount's watcher). No real YAML nests this deep.
MAX_YAML_DEPTH = 64
_YAML_INDICATOR = re.compile(rb"[-?:](?=[ \t])")


def _yaml_depth(data: bytes) -> int:
    """An upper bound on the YAML scanner's indent levels: one per distinct indentation, and
    the block indicators (``- ``, ``? ``, ``: ``) of the line that has the most."""
    widths: set[int] = set()
    most = 0
    for line in data.split(b"\n"):
        widths.add(len(line) - len(line.lstrip(b" \t")))
        if len(line) > 2 * most:  # no line shorter can hold more indicators
            most = max(most, len(_YAML_INDICATOR.findall(line)))
    return len(widths) + most


# What bytes.lstrip() takes from the start of a line (a line holds no "\n").
_INDENT = re.compile(rb"[ \t\r\x0b\x0c]*")


class _Reader:
    """Turns one parse tree into an :class:`Outline`."""

    def __init__(self, grammar: Grammar, data: bytes, suffix: str, deadline: float) -> None:
        self.deadline = deadline
        self.grammar = grammar
        self.data = data
        self.suffix = suffix
        # The qualifier each definition lends those inside it (see _qualifier), by index.
        self.qualifiers: list[str] = []

    def text(self, node: Any) -> str:
        return self.data[node.start_byte : node.end_byte].decode("utf-8", "replace")

    def begins_line(self, node: Any) -> bool:
        """Whether only indentation precedes ``node`` on its line."""
        return self.begins_at(node.start_byte, node.start_point.column)

    def begins_at(self, start: int, column: int) -> bool:
        """Whether only indentation precedes byte ``start``, at ``column`` of its line
        (tree-sitter's columns are bytes, so its line starts ``column`` bytes before). Read
        from the node, not from a per-file table of the lines (a tenth of the outline's
        time); a long run before it is matched, stopping at its first other byte, so a
        one-line file's nodes each read their indentation only (linear)."""
        if not column:
            return True
        if column <= 64:
            return self.data[start - column : start].isspace()  # as bytes.lstrip() has it
        found = _INDENT.match(self.data, start - column, start)
        return found is not None and found.end() == start  # it always matches (maybe empty)

    @staticmethod
    def last_row(node: Any) -> int:
        end = node.end_point
        return end.row - 1 if end.column == 0 and end.row > node.start_point.row else end.row

    def read(self, tree: Any, query: Any) -> Outline:
        import tree_sitter

        found: list[tuple[int, int, Any, Any, Any, str, Any]] = []
        cursor = tree_sitter.QueryCursor(query)
        cursor.set_max_start_depth(MAX_TREE_DEPTH)
        for count, (_pattern, captures) in enumerate(cursor.matches(tree.root_node)):
            self._on_time(count)
            kind = next((k for k in captures if k.startswith("def.")), None)
            if kind is None or "name" not in captures:
                continue
            node, name = captures[kind][0], captures["name"][0]
            outer = self._outer(node)
            receiver = captures.get("receiver")
            found.append(
                (
                    outer.start_byte,
                    -outer.end_byte,
                    outer,
                    node,
                    name,
                    kind[4:],
                    receiver and receiver[0],
                )
            )
        found.sort(key=lambda f: (f[0], f[1]))
        result = Outline(self.grammar.module.removeprefix("tree_sitter_"))
        stack: list[tuple[int, int]] = []  # (end byte, definition index)
        seen: set[int] = set()
        config = self.grammar.config
        for count, (start_byte, neg_end, outer, node, name, kind, receiver) in enumerate(found):
            self._on_time(count)
            if node.id in seen:
                continue
            seen.add(node.id)
            end_byte = -neg_end
            while stack and stack[-1][0] <= start_byte:
                stack.pop()
            parents = tuple(i for _, i in stack)
            if len(parents) >= MAX_DEPTH:
                continue
            row = outer.start_point.row
            last = self.last_row(outer)
            if config and parents and last == row:
                continue  # a one-line key inside another: a leaf, labelled by its parent
            cut = self.begins_line(outer)
            start_row, first = self._preamble(outer, row) if cut else (row, start_byte)
            label, names = self._label(node, name, kind, receiver, parents, result)
            result.definitions.append(
                Definition(
                    start_row,
                    name.start_point.row,
                    last,
                    label,
                    names,
                    cut,
                    len(parents),
                    parents,
                    first,
                    end_byte,
                    name.start_byte,
                )
            )
            self.qualifiers.append(_qualifier(result.definitions[-1]))
            stack.append((end_byte, len(result.definitions) - 1))
            self._statements(node.child_by_field_name("body"), result.statements)
        self._statements(tree.root_node, result.statements)
        return result

    def _on_time(self, count: int) -> None:
        if count % 256 == 255 and time.thread_time() > self.deadline:
            raise _OverBudget

    def _outer(self, node: Any) -> Any:
        """The node with its wrappers: a decorated definition, ``export``, ``template<>``."""
        wrappers = self.grammar.wrappers
        while wrappers and (parent := node.parent) is not None and parent.type in wrappers:
            if parent.type == "type_declaration" and parent.named_child_count > 1:
                break  # a grouped `type (...)`: each spec is its own definition
            if parent.type in ("lexical_declaration", "variable_declaration") and (
                parent.named_child_count > 1
            ):
                break
            node = parent
        return node

    def _preamble(self, node: Any, row: int) -> tuple[int, int]:
        """The first line of ``node`` (which begins line ``row``) with the comments and
        attributes directly above it (no blank line between), and the byte it starts at."""
        first = node.start_byte
        # The first of its list (a YAML document's first key): its comments are its parent's.
        sibling = node.prev_sibling
        while sibling is None and (parent := node.parent) is not None:
            if parent.start_byte != node.start_byte:
                break
            node = parent
            sibling = node.prev_sibling
        kinds = self.grammar.preamble
        while sibling is not None and sibling.type in kinds:
            if self.last_row(sibling) < row - 1 or not self.begins_line(sibling):
                break
            point = sibling.start_point
            row, first = point.row, sibling.start_byte - point.column
            sibling = sibling.prev_sibling
        return row, first

    def _label(
        self,
        node: Any,
        name: Any,
        kind: str,
        receiver: Any,
        parents: tuple[int, ...],
        result: Outline,
    ) -> tuple[str, tuple[str, ...]]:
        """A definition's label part and the names it is found by."""
        raw = self.text(name)
        if self.grammar.config:
            key = raw.strip("\"'")
            if kind == "table":
                return f"[{raw}]", ()
            if kind == "array":
                return f"[[{raw}]]", ()
            return key, ()
        if node.type == "function_definition" and self.suffix not in (".py", ".pyi", ".sh"):
            raw = self.text(_declared(name)) if _declared(name) is not None else raw
        elif node.type == "type_definition":
            raw = self.text(_declared(name) or name)
        simple = _simple(raw)
        if kind == "impl":
            trait = node.child_by_field_name("trait")
            label = f"impl {self.text(trait)} for {raw}" if trait is not None else f"impl {raw}"
            return _one_line(label), ()
        if kind == "method":
            label = f"{raw}()"
        elif kind == "func" and receiver is not None:
            owner = _simple(self.text(receiver).strip("()").split()[-1].lstrip("*"))
            label = f"func ({owner}) {raw}"
            return _one_line(label), (simple, f"{owner}.{simple}")
        else:
            label = f"{_KIND_WORDS.get(kind, kind)} {raw}"
        names = [simple] if simple else []
        qualifiers = [q for q in map(self.qualifiers.__getitem__, parents) if q]
        if qualifiers and simple:
            names.append(".".join([*qualifiers, simple]))
        if "::" in raw or ("." in raw and self.suffix not in (".yaml", ".yml", ".json")):
            dotted = ".".join(p for p in re.split(r"::|\.", raw) if p)
            if dotted and dotted not in names:
                names.append(dotted)
        return _one_line(label), tuple(dict.fromkeys(names))

    def _statements(self, body: Any, out: set[int]) -> None:
        """The lines where a statement of ``body`` (a definition's, or the file's root)
        starts: the places to cut a definition too long for one chunk."""
        if body is None:
            return
        children = body.named_children
        if len(children) == 1 and children[0].type.endswith("_list"):
            children = children[0].named_children
        kinds = self.grammar.preamble
        run = -1  # the first line of the comments just above the next statement, if any
        last = -2  # the last line of the comment before, when the child before was one
        for child in children:
            row, column = child.start_point
            if not self.begins_at(child.start_byte, column):
                run = -1
                continue
            attached = run >= 0 and last >= row - 1
            out.add(run if attached else row)
            if child.type in kinds:
                if not attached:
                    run = row
                last = self.last_row(child)  # only a comment's end is asked next
            else:
                run = -1


def _declared(node: Any) -> Any:
    """The name inside a C declarator (``*f(int)`` -> ``f``), or None."""
    seen = 0
    while node is not None and seen < 16:
        if node.type in (
            "identifier",
            "field_identifier",
            "qualified_identifier",
            "destructor_name",
            "operator_name",
            "type_identifier",
        ):
            return node
        inner = node.child_by_field_name("declarator")
        if inner is None:
            return None
        node, seen = inner, seen + 1
    return None


def _simple(raw: str) -> str:
    """The last part of a qualified name, without generics: ``ns::Foo<T>`` -> ``Foo``."""
    if "<" not in raw and ":" not in raw and "." not in raw:
        return raw.strip()  # the usual name: what the rest gives, without its regexes
    raw = re.sub(r"<.*>", "", raw)
    parts = [p for p in re.split(r"::|\.", raw) if p]
    return parts[-1].strip() if parts else raw.strip()


_QUALIFYING = re.compile(
    r"^(?:class|struct|interface|trait|enum|record|namespace|mod|impl|type|union)\s"
)


def _qualifier(definition: Definition) -> str:
    """The name a definition lends to those inside it (a class's, an impl's type), or ""."""
    if definition.label.startswith("impl "):
        label = definition.label.rsplit(" for ", 1)[-1].removeprefix("impl ")
        return _simple(label)
    if _QUALIFYING.match(definition.label):
        return definition.names[0] if definition.names else ""
    return ""


def _one_line(text: str) -> str:
    return " ".join(text.split())
