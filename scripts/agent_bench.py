#!/usr/bin/env python3
"""An agent benchmark anyone can rerun: the same questions, three ways to reach one collection.

Arms (each agent session gets one):

* ``mount``: a semfs mount of the store, with ``semfs guide MNT`` in the prompt;
* ``grep``:  the plain source folder with the original files (PDF, Word and PowerPoint are
  not text there: ``pdftotext`` and ``unzip`` are allowed);
* ``mcp``:   the MCP tools of ``semfs mcp`` over stdio, through a shell command
  (``mcpcall TOOL JSON``), so a shell-only agent can call them. The prompt holds the server's
  instructions and its tool list, as an MCP client would show them.

``setup`` writes one session folder per arm and question (``--mode single``, the main mode)
or per arm (``--mode many``: every question in one session), each with ``prompt.md`` (what
the agent is given), ``run`` (the logging wrapper: every command the agent runs goes through
it, and ``log.jsonl`` records the command, its exit status and the bytes of its output, what
the agent read) and ``answer`` (how the agent gives its answer: a page path and the answering
line, into ``answers.jsonl``; not counted as a command). For the mount arm it mounts the
store at ``WORK/mnt``; ``stop`` unmounts it. Agents come from whatever agent the person
running the benchmark has: start one per session with its ``prompt.md`` (``WORK/sessions.tsv``
lists them).

Arms may join one work folder at different times, with the same collection, store, questions
and mode (``setup --arms grep`` while the store is built, then ``setup --arms mount,mcp``);
an arm is never set up twice there.

``score`` reads the logs and prints, per arm: commands, bytes read, right pages (the
question's ``expected_path`` or an alternate named in the agent's answer) and quoted answers
(its ``answer`` line in the agent's), per question and in total, the tuned and held-out
questions apart (the question file's ``split`` column).

The question file is the doc-questions TSV (question, expected_path, alternates, kind,
answer) with an optional ``split`` column (``held-out`` or ``tuned``); questions are named
q01, q02, ... in file order.

Examples:
    python scripts/agent_bench.py setup --collection bench-out/bigcorpus/collection \\
        --store bench-out/bigcorpus/store --questions scripts/agentbench/bigcorpus.tsv \\
        --work bench-out/agents --only q01,q02,q03
    bench-out/agents/sessions/grep/q01/run 'grep -rl "max_connections" . | head'
    bench-out/agents/sessions/grep/q01/answer postgresql/runtime-config-connection.docx \\
        'Determines the maximum number of concurrent connections to the database server.'
    python scripts/agent_bench.py score --work bench-out/agents --markdown agents.md
    python scripts/agent_bench.py stop --work bench-out/agents
    python scripts/agent_bench.py merge --out shared.tsv --held-out mintlify-docs \\
        fastapi-docs=../shared/datasets/doc-questions/fastapi-docs.tsv \\
        mem0-docs=../shared/datasets/doc-questions/mem0-docs.tsv \\
        mintlify-docs=../shared/datasets/doc-questions/mintlify-docs.tsv
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve()
ARMS = ("mount", "grep", "mcp")
KINDS = ("paraphrase", "exact", "vague", "deep")
HELD_OUT = "held-out"
# What the wrapper shows of one command's output (stdout and stderr, in order): about what an
# agent's shell tool shows. The log keeps both the bytes shown and the bytes produced.
MAX_OUTPUT = 30_000
COMMAND_TIMEOUT = 300.0
MOUNT_TIMEOUT = 120.0


def default_semfs() -> str:
    found = shutil.which("semfs", path=str(Path(sys.executable).parent)) or shutil.which("semfs")
    return found or "semfs"


# --- questions -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    qid: str
    text: str
    expected: str
    alternates: tuple[str, ...]
    kind: str
    answer: str
    split: str  # "tuned" or "held-out"

    @property
    def targets(self) -> tuple[str, ...]:
        return (self.expected, *self.alternates)


def read_questions(path: Path) -> list[Question]:
    """The doc-questions TSV, read with plain tab splitting (an answer may start with a quote
    character, which a CSV reader would strip), plus the optional ``split`` column."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines:
        raise SystemExit(f"agent_bench: {path} is empty")
    col = {name: i for i, name in enumerate(lines[0].split("\t"))}
    need = {"question", "expected_path", "alternates", "kind", "answer"}
    if not need <= col.keys():
        raise SystemExit(f"agent_bench: {path} lacks the columns {sorted(need - col.keys())}")
    out: list[Question] = []
    for line in lines[1:]:
        if not line.strip():
            continue
        f = line.split("\t")
        f += [""] * (len(col) - len(f))
        split = f[col["split"]].strip() if "split" in col else ""
        out.append(
            Question(
                f"q{len(out) + 1:02d}",
                f[col["question"]],
                f[col["expected_path"]].strip(),
                tuple(a.strip() for a in f[col["alternates"]].split(",") if a.strip()),
                f[col["kind"]].strip(),
                f[col["answer"]],
                HELD_OUT if split == HELD_OUT else "tuned",
            )
        )
    return out


def select(questions: list[Question], only: str | None, split: str | None) -> list[Question]:
    chosen = questions
    if only:
        wanted = [q.strip() for q in only.split(",") if q.strip()]
        known = {q.qid: q for q in questions}
        unknown = [w for w in wanted if w not in known]
        if unknown:
            raise SystemExit(f"agent_bench: no questions {', '.join(unknown)}")
        chosen = [known[w] for w in wanted]
    if split:
        chosen = [q for q in chosen if q.split == split]
    if not chosen:
        raise SystemExit("agent_bench: no question selected")
    return chosen


# --- prompts ---------------------------------------------------------------------------------

TASK_ONE = """\
# Task

Answer this question from the {what} described below:

> {question}

Find the {unit} of the collection that answers it, and the line of that {unit} that answers it.
"""

TASK_MANY = """\
# Task

Answer each of these {count} questions from the {what} described below. For each, find the
{unit} of the collection that answers it, and the line of that {unit} that answers it.

{questions}
"""

# What the collection is, as the prompts name it: documentation (the default) or a source tree
# (issue 42: a repository, its questions about code).
SUBJECTS = {
    "docs": {
        "what": "documentation collection",
        "unit": "page",
        "noun": "The documentation",
        "example": "guide/install/setup.html",
        "folder": "pages as the product teams ship them, in several file formats. The usual "
        "tools are installed (ls, find, grep, sed,\nhead, ...), and so are `pdftotext` and "
        "`unzip`.",
    },
    "code": {
        "what": "source tree",
        "unit": "file",
        "noun": "The source tree",
        "example": "net/http/transport.go",
        "folder": "a git checkout, as its developers keep it. The usual tools are installed "
        "(ls, find, grep,\nsed, head, git grep, ...).",
    },
}

RULES = """\
# Rules

- Run every shell command through the logging wrapper, as one argument:
      {run} 'COMMAND'
  (one command line; pipes, quotes and && work as in bash). Its output is what you see. Use
  no other tool to list, search or read anything.
- Work only in the collection below; do not use the web or what you remember of the software.
  Do not write inside the collection; scratch files go in $TMPDIR.
- Spend as few commands and read as few bytes as you can: search narrowly, read only the
  lines you need.
- Give your answer with (not counted as a command):
      {answer}{id_arg} 'PATH' 'ANSWERING LINE'
  PATH is the {unit}'s path relative to the collection's top folder, as its file is named
  there (for example `{example}`), and ANSWERING LINE is the line quoted from it. {then}
"""

ARM_TEXT = {
    "mount": """\
# The collection

{noun} is mounted by semfs at `{root}` (your commands run there). This is how to
use it (`semfs guide`):

{guide}
""",
    "grep": """\
# The collection

{noun} is the folder `{root}` (your commands run there): {folder}
""",
    "mcp": """\
# The collection

{noun} is served by an MCP server (semfs). Call its tools from the shell, through
the wrapper, with `mcpcall TOOL 'JSON ARGUMENTS'`, for example:

    {run} "mcpcall search '{{\\"query\\": \\"rotate an api key\\"}}'"

`mcpcall --list` prints the tools again. Paths in the tools are relative to the collection's
top folder. What the server tells its clients:

{instructions}

Its tools:

{tools}
""",
}


def task_text(questions: list[Question], subject: str = "docs") -> str:
    words = SUBJECTS[subject]
    if len(questions) == 1:
        return TASK_ONE.format(question=questions[0].text, **words)
    listed = "\n".join(f"- **{q.qid}**: {q.text}" for q in questions)
    return TASK_MANY.format(count=len(questions), questions=listed, **words)


def prompt(
    arm: str,
    session: Path,
    root: str,
    questions: list[Question],
    arm_info: dict[str, str],
    subject: str = "docs",
) -> str:
    many = len(questions) > 1
    words = SUBJECTS[subject]
    rules = RULES.format(
        run=session / "run",
        answer=session / "answer",
        id_arg=" --id QID" if many else "",
        example=words["example"],
        unit=words["unit"],
        then="Give one answer per question (QID is q01, q02, ... as above), then stop."
        if many
        else "Then stop.",
    )
    body = ARM_TEXT[arm].format(
        root=root, run=session / "run", noun=words["noun"], folder=words["folder"], **arm_info
    )
    return f"{task_text(questions, subject)}\n{rules}\n{body}"


# --- setup -----------------------------------------------------------------------------------


def write_exec(path: Path, lines: list[str]) -> None:
    path.write_text("#!/bin/sh\n" + "\n".join(lines) + "\n", encoding="utf-8")
    path.chmod(0o755)


def tree_digest(root: Path) -> str:
    """Names and sizes of every file under ``root``: ``score`` warns when an agent changed it."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath, name)
            with contextlib.suppress(OSError):
                h.update(f"{path.relative_to(root)}\0{path.lstat().st_size}\n".encode())
    return h.hexdigest()


def mount(semfs: str, store: Path, mnt: Path, log: Path, extra: list[str]) -> None:
    mnt.mkdir(parents=True, exist_ok=True)
    if os.path.ismount(mnt):
        return
    proc = subprocess.run(
        [semfs, "mount", str(mnt), "--store", str(store), "--log-file", str(log), *extra],
        check=False,
        capture_output=True,
        text=True,
        timeout=MOUNT_TIMEOUT,
    )
    if proc.returncode != 0 or not os.path.ismount(mnt):
        raise SystemExit(f"agent_bench: semfs mount failed: {proc.stderr.strip()}")


def unmount(semfs: str, mnt: Path) -> None:
    if not os.path.ismount(mnt):
        return
    subprocess.run(
        [semfs, "umount", str(mnt)], check=False, capture_output=True, timeout=MOUNT_TIMEOUT
    )
    for command in (["fusermount3", "-u"], ["fusermount", "-u"], ["umount", "-l"]):
        if not os.path.ismount(mnt):
            return
        if shutil.which(command[0]):
            subprocess.run(
                [*command, str(mnt)], check=False, capture_output=True, timeout=MOUNT_TIMEOUT
            )


def mcp_description(config: dict[str, Any]) -> dict[str, str]:
    """The server's instructions and its tools (name, description, parameters), as a client
    that lists them shows them to the model."""
    info = mcp_session(config, None, {})
    tools = []
    for tool in info["tools"]:
        params = tool.get("inputSchema", {}).get("properties", {})
        required = set(tool.get("inputSchema", {}).get("required", []))
        args = ", ".join(
            f"{name}{'' if name in required else '?'}: {spec.get('type', 'any')}"
            for name, spec in params.items()
        )
        tools.append(f"- `{tool['name']}({args})`: {' '.join(tool['description'].split())}")
    return {"instructions": info["instructions"] or "(none)", "tools": "\n".join(tools)}


def setup(args: argparse.Namespace) -> None:
    work: Path = args.work.resolve()
    collection: Path = args.collection.resolve()
    store: Path = args.store.resolve()
    questions = select(read_questions(args.questions.resolve()), args.only, args.split)
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    if bad := set(arms) - set(ARMS):
        raise SystemExit(f"agent_bench: unknown arms {sorted(bad)} (known: {', '.join(ARMS)})")
    if not collection.is_dir():
        raise SystemExit(f"agent_bench: {collection} is not a folder")
    if done := [arm for arm in arms if (work / "sessions" / arm).exists()]:
        raise SystemExit(
            f"agent_bench: {work}/sessions already has {', '.join(done)}: score it, or remove it"
        )
    # More arms may join a work folder later (grep's sessions can run while the store is
    # built): the same collection, store, questions and mode, or score would mix runs.
    earlier = load_config(work) if (work / "bench.json").exists() else None
    work.mkdir(parents=True, exist_ok=True)
    bin_dir = work / "bin"
    bin_dir.mkdir(exist_ok=True)
    config: dict[str, Any] = {
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "collection": str(collection),
        "collection_digest": tree_digest(collection),
        "store": str(store),
        "questions": str(args.questions.resolve()),
        "mode": args.mode,
        "arms": arms,
        "semfs": args.semfs,
        "python": sys.executable,
        "max_output": args.max_output,
        "command_timeout": args.command_timeout,
        "mcp_structured": args.mcp_structured,
        "mnt": str(work / "mnt"),
        "mount_options": shlex.split(args.mount_options or ""),
    }
    if earlier is not None:
        for key in ("collection", "store", "questions", "mode"):
            if earlier.get(key) != config[key]:
                raise SystemExit(
                    f"agent_bench: {work} was set up with another {key} "
                    f"({earlier.get(key)}): use another --work"
                )
        for key in ("created", "collection_digest"):
            config[key] = earlier[key]
        config["arms"] = [*earlier["arms"], *arms]
    (work / "bench.json").write_text(json.dumps(config, indent=1) + "\n", encoding="utf-8")
    py, me = shlex.quote(sys.executable), shlex.quote(str(SCRIPT))
    write_exec(
        bin_dir / "mcpcall", [f'exec {py} {me} mcpcall --work {shlex.quote(str(work))} "$@"']
    )
    arm_info: dict[str, dict[str, str]] = {"grep": {}, "mcp": {}}
    roots = {"grep": str(collection), "mcp": str(work), "mount": config["mnt"]}
    try:
        if "mount" in arms:
            mount(
                args.semfs, store, Path(config["mnt"]), work / "mount.log", config["mount_options"]
            )
            guide = subprocess.run(
                [args.semfs, "guide", config["mnt"]],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            arm_info["mount"] = {"guide": guide.rstrip()}
        if "mcp" in arms:
            arm_info["mcp"] = mcp_description(config)
        groups = [[q] for q in questions] if args.mode == "single" else [questions]
        listed = work / "sessions.tsv"
        rows = (
            listed.read_text(encoding="utf-8").splitlines()
            if earlier is not None and listed.exists()
            else ["arm\tsession\tquestions\tprompt\trun"]
        )
        first = len(rows)
        for arm in arms:
            for group in groups:
                name = group[0].qid if args.mode == "single" else "all"
                session = work / "sessions" / arm / name
                (session / "tmp").mkdir(parents=True)
                meta = {"arm": arm, "root": roots[arm], "questions": [q.qid for q in group]}
                (session / "session.json").write_text(json.dumps(meta) + "\n", encoding="utf-8")
                run_cmd = f'exec {py} {me} exec --session {shlex.quote(str(session))} -- "$@"'
                write_exec(session / "run", [run_cmd])
                ans_cmd = f'exec {py} {me} answer --session {shlex.quote(str(session))} "$@"'
                write_exec(session / "answer", [ans_cmd])
                text = prompt(arm, session, roots[arm], group, arm_info[arm], args.subject)
                (session / "prompt.md").write_text(text, encoding="utf-8")
                rows.append(
                    f"{arm}\t{session}\t{','.join(meta['questions'])}\t{session / 'prompt.md'}\t"
                    f"{session / 'run'}"
                )
        (work / "sessions.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    except BaseException:  # leave no mount behind a failed setup
        unmount(args.semfs, Path(config["mnt"]))
        raise
    print(f"agent_bench: {len(rows) - first} sessions under {work / 'sessions'}; listed in "
          f"{work / 'sessions.tsv'}")  # fmt: skip
    print("Give each agent its prompt.md; then: "
          f"{Path(sys.executable).name} {SCRIPT.name} score --work {work}")  # fmt: skip
    if "mount" in arms:
        print(f"The mount stays at {config['mnt']} until: {SCRIPT.name} stop --work {work}")


def stop(args: argparse.Namespace) -> None:
    config = load_config(args.work.resolve())
    unmount(config["semfs"], Path(config["mnt"]))
    print("agent_bench: stopped" if not os.path.ismount(config["mnt"]) else "still mounted")


def load_config(work: Path) -> dict[str, Any]:
    try:
        config: dict[str, Any] = json.loads((work / "bench.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SystemExit(f"agent_bench: {work} has no bench.json (run setup first)") from None
    return config


# --- the wrapper -----------------------------------------------------------------------------


def append_jsonl(path: Path, record: dict[str, Any]) -> None:
    """One line, one write on an O_APPEND descriptor: lines of concurrent writers never mix."""
    line = (json.dumps(record, ensure_ascii=False) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def run_command(args: argparse.Namespace) -> int:
    """``run 'COMMAND'``: run it with bash in the arm's folder, show its output (cut at
    max_output bytes), log the command, its exit status and the bytes shown."""
    session: Path = args.session.resolve()
    meta = json.loads((session / "session.json").read_text(encoding="utf-8"))
    config = load_config(session.parents[2])
    command = " ".join(a for a in args.argv if a != "--").strip()
    if not command:
        print("usage: run 'COMMAND'", file=sys.stderr)
        return 2
    work = session.parents[2]
    env = {
        **os.environ,
        "PATH": f"{work / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "TMPDIR": str(session / "tmp"),
        "AGENT_BENCH_SESSION": str(session),
    }
    started = time.monotonic()
    proc = subprocess.Popen(
        ["bash", "-c", command],
        cwd=meta["root"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: a timeout ends all of it
    )
    timed_out = False
    try:
        output, _ = proc.communicate(timeout=config["command_timeout"])
    except subprocess.TimeoutExpired:
        timed_out = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
    limit = config["max_output"]
    shown = output[:limit]
    notes = []
    if len(output) > limit:
        notes.append(f"[output cut at {limit} of {len(output)} bytes]")
    if timed_out:
        notes.append(f"[command stopped after {config['command_timeout']:g} s]")
    sys.stdout.buffer.write(shown)
    if notes:
        sys.stdout.write(("\n" if shown and not shown.endswith(b"\n") else "") + " ".join(notes)
                         + "\n")  # fmt: skip
    sys.stdout.flush()
    code = 124 if timed_out else proc.returncode
    append_jsonl(
        session / "log.jsonl",
        {
            "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "cmd": command,
            "exit": code,
            "bytes": len(shown),
            "bytes_produced": len(output),
            "seconds": round(time.monotonic() - started, 3),
        },
    )
    return code


def give_answer(args: argparse.Namespace) -> int:
    session: Path = args.session.resolve()
    meta = json.loads((session / "session.json").read_text(encoding="utf-8"))
    qid = args.id or (meta["questions"][0] if len(meta["questions"]) == 1 else None)
    if qid not in meta["questions"]:
        print(f"answer: --id is one of {', '.join(meta['questions'])}", file=sys.stderr)
        return 2
    append_jsonl(session / "answers.jsonl", {"id": qid, "path": args.path, "line": args.line})
    print(f"answer for {qid} recorded")
    return 0


# --- mcpcall ---------------------------------------------------------------------------------


def mcp_session(config: dict[str, Any], tool: str | None, arguments: dict[str, Any]) -> Any:
    """Start ``semfs mcp`` on the store over stdio, then list the tools (``tool`` None) or
    call one. The server's log goes to a file, not to the agent."""
    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    server = StdioServerParameters(
        command=config["semfs"],
        args=["mcp", "--store", config["store"]],
        env=dict(os.environ),  # the SDK passes only a few variables by default
    )
    log = Path(config["mnt"]).parent / "mcp-server.log"

    async def go() -> Any:
        with log.open("a", encoding="utf-8") as errlog:
            async with (
                stdio_client(server, errlog=errlog) as (read, write),
                ClientSession(read, write) as client,
            ):
                init = await client.initialize()
                if tool is None:
                    listed = await client.list_tools()
                    return {
                        "instructions": init.instructions,
                        "tools": [t.model_dump(by_alias=True) for t in listed.tools],
                    }
                return await client.call_tool(tool, arguments)

    return anyio.run(go)


def mcpcall(args: argparse.Namespace) -> int:
    """``mcpcall TOOL 'JSON'``: print the tool's text (and its structured content when the
    benchmark was set up with --mcp-structured); ``mcpcall --list``: the tools."""
    config = load_config(args.work.resolve())
    if args.list or not args.tool:
        info = mcp_description(config)
        print(info["tools"])
        return 0 if args.list else 2
    try:
        arguments = json.loads(args.json or "{}")
    except json.JSONDecodeError as exc:
        print(f"mcpcall: the arguments are not JSON ({exc})", file=sys.stderr)
        return 2
    if not isinstance(arguments, dict):
        print("mcpcall: the arguments are a JSON object", file=sys.stderr)
        return 2
    result = mcp_session(config, args.tool, arguments)
    text = "\n".join(block.text for block in result.content if block.type == "text")
    structured = getattr(result, "structuredContent", None) or getattr(
        result, "structured_content", None
    )
    out = text
    if config["mcp_structured"] and structured is not None:
        out += "\n" + json.dumps(structured, ensure_ascii=False)
    print(out)
    if session := os.environ.get("AGENT_BENCH_SESSION"):
        append_jsonl(
            Path(session) / "mcp.jsonl",
            {
                "tool": args.tool,
                "text_bytes": len(text.encode()),
                "structured_bytes": len(json.dumps(structured).encode()) if structured else 0,
            },
        )
    is_error = getattr(result, "isError", None) or getattr(result, "is_error", False)
    return 1 if is_error else 0


# --- score -----------------------------------------------------------------------------------


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            out.append(json.loads(line))
    return out


def names(text: str, path: str) -> bool:
    """Does ``text`` name the collection path ``path`` (also as its text view, PATH.md, or
    under a mount's absolute path)?"""
    return re.search(rf"(?<![\w.-]){re.escape(path)}(?![\w-])", text) is not None


def normalise(text: str) -> str:
    return " ".join(text.split())


@dataclass
class Result:
    arm: str
    question: Question
    session: str
    commands: int  # of its session (a many-questions session's are counted once, on its first)
    bytes: int
    answered: bool
    right: bool
    quoted: bool
    shared: bool  # the session answered several questions
    session_dir: str = ""


def score_sessions(work: Path) -> tuple[list[Result], list[str]]:
    config = load_config(work)
    questions = {q.qid: q for q in read_questions(Path(config["questions"]))}
    results: list[Result] = []
    warnings = []
    for session_json in sorted((work / "sessions").glob("*/*/session.json")):
        session = session_json.parent
        meta = json.loads(session_json.read_text(encoding="utf-8"))
        log = read_jsonl(session / "log.jsonl")
        answers = read_jsonl(session / "answers.jsonl")
        extra = ""
        if (session / "answer.md").is_file():  # an agent that wrote its answer by hand
            extra = (session / "answer.md").read_text(encoding="utf-8", errors="replace")
        commands, read = len(log), sum(int(r.get("bytes", 0)) for r in log)
        many = len(meta["questions"]) > 1
        for i, qid in enumerate(meta["questions"]):
            q = questions[qid]
            given = [a for a in answers if a.get("id") == qid]
            text = "\n".join(f"{a.get('path', '')}\n{a.get('line', '')}" for a in given)
            if not many:
                text += "\n" + extra
            right = any(names(text, t) for t in q.targets)
            quoted = bool(q.answer.strip()) and normalise(q.answer) in normalise(text)
            results.append(
                Result(
                    meta["arm"],
                    q,
                    session.name,
                    commands if i == 0 else 0,
                    read if i == 0 else 0,
                    bool(text.strip()),
                    right,
                    quoted,
                    many,
                    str(session),
                )
            )
    digest = config.get("collection_digest")
    if digest and "grep" in config["arms"] and tree_digest(Path(config["collection"])) != digest:
        warnings.append("the collection changed during the run (an agent wrote into it?)")
    return results, warnings


def page_format(path: str) -> str:
    """The format of a collection page, by its name: pdf, docx, html, md, ..."""
    name = path.rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[-1].lower() if "." in name else "none"


def totals(results: Iterable[Result]) -> dict[str, Any]:
    rs = list(results)
    return {
        "questions": len(rs),
        "commands": sum(r.commands for r in rs),
        "bytes": sum(r.bytes for r in rs),
        "answered": sum(r.answered for r in rs),
        "right": sum(r.right for r in rs),
        "quoted": sum(r.quoted for r in rs),
    }


def report(results: list[Result], structured_shown: bool = False) -> dict[str, Any]:
    arms = sorted({r.arm for r in results}, key=lambda a: ARMS.index(a) if a in ARMS else 9)
    out: dict[str, Any] = {"arms": {}, "questions": []}
    for arm in arms:
        mine = [r for r in results if r.arm == arm]
        out["arms"][arm] = {
            "all": totals(mine),
            "tuned": totals(r for r in mine if r.question.split != HELD_OUT),
            HELD_OUT: totals(r for r in mine if r.question.split == HELD_OUT),
            "by_format": {
                f: totals(r for r in mine if page_format(r.question.expected) == f)
                for f in sorted({page_format(r.question.expected) for r in mine})
            },
            "by_kind": {
                k: totals(r for r in mine if r.question.kind == k)
                for k in KINDS
                if any(r.question.kind == k for r in mine)
            },
        }
    for arm in arms:
        structured = [
            rec for s in sorted({r.session_dir for r in results if r.arm == arm})
            for rec in read_jsonl(Path(s) / "mcp.jsonl")
        ]  # fmt: skip
        if structured:
            out["arms"][arm]["mcp_structured_bytes"] = sum(
                int(rec.get("structured_bytes", 0)) for rec in structured
            )
            out["arms"][arm]["structured_shown"] = structured_shown
    for r in results:
        out["questions"].append(
            {
                "arm": r.arm,
                "id": r.question.qid,
                "session": r.session,
                "kind": r.question.kind,
                "split": r.question.split,
                "commands": r.commands,
                "bytes": r.bytes,
                "answered": r.answered,
                "right": r.right,
                "quoted": r.quoted,
                "shared": r.shared,
            }
        )
    return out


def markdown(data: dict[str, Any], warnings: list[str]) -> str:
    lines = ["| arm | questions | part | commands | KB read | right pages | answer quoted |",
             "|---|---:|---|---:|---:|---:|---:|"]  # fmt: skip
    # One session for many questions counts its commands and bytes on its first question:
    # only the totals say anything then, not the parts (tuned, held-out, formats).
    many = any(q["shared"] for q in data["questions"])
    split = ("all",) if many else ("all", "tuned", HELD_OUT)
    for arm, parts in data["arms"].items():
        rows = [(part, parts[part]) for part in split]
        if not many:
            rows += [(f"answer in {f}", t) for f, t in parts["by_format"].items()]
        for part, t in rows:
            if not t["questions"]:
                continue
            lines.append(
                f"| {arm} | {t['questions']} | {part} | {t['commands']} | "
                f"{t['bytes'] / 1000:.1f} | {t['right']}/{t['questions']} | "
                f"{t['quoted']}/{t['questions']} |"
            )
    arms = list(data["arms"])
    ratios = []
    for part in split:
        base = data["arms"].get("grep", {}).get(part)
        if not base or not base["bytes"] or not base["commands"]:
            continue
        for arm in arms:
            t = data["arms"][arm][part]
            if arm != "grep":
                ratios.append(
                    f"- {arm} / grep ({part}): {t['bytes'] / base['bytes']:.2f}x the bytes, "
                    f"{t['commands'] / base['commands']:.2f}x the commands, "
                    f"{t['right']} vs {base['right']} right pages"
                )
    if ratios:
        lines += ["", *ratios]
    if data["arms"].get("mcp", {}).get("mcp_structured_bytes"):
        mcp = data["arms"]["mcp"]
        shown = "shown" if mcp["structured_shown"] else "not shown"
        kb = mcp["mcp_structured_bytes"] / 1000
        lines += ["", f"mcp: the tools' structured content ({shown} to the agent): {kb:.1f} KB"]
    lines += ["", "| question | kind | split | " + " | ".join(arms) + " |",
              "|---|---|---|" + "---|" * len(arms)]  # fmt: skip
    cells: dict[tuple[str, str], str] = {}
    meta: dict[str, tuple[str, str]] = {}
    for q in data["questions"]:
        mark = "right" if q["right"] else ("wrong" if q["answered"] else "none")
        shared = " (shared session)" if q["shared"] else ""
        cells[(q["id"], q["arm"])] = f"{q['commands']} cmds, {q['bytes']:,} B, {mark}{shared}"
        meta[q["id"]] = (q["kind"], q["split"])
    # q2 before q10: ids in the question file's order (numeric where they are).
    for qid in sorted(meta, key=lambda q: (len(q), q)):
        row = [cells.get((qid, arm), "") for arm in arms]
        lines.append(f"| {qid} | {meta[qid][0]} | {meta[qid][1]} | " + " | ".join(row) + " |")
    lines += [f"\nWarning: {w}" for w in warnings]
    return "\n".join(lines) + "\n"


def score(args: argparse.Namespace) -> None:
    work = args.work.resolve()
    results, warnings = score_sessions(work)
    if not results:
        raise SystemExit(f"agent_bench: no sessions under {work}/sessions")
    data = report(results, bool(load_config(work).get("mcp_structured")))
    data["warnings"] = warnings
    text = markdown(data, warnings)
    print(text, end="")
    if args.json:
        args.json.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    if args.markdown:
        args.markdown.write_text(text, encoding="utf-8")


# --- merging question sets ------------------------------------------------------------------


def merge(args: argparse.Namespace) -> None:
    """Several doc-questions files as one, for a collection that holds their corpora side by
    side: each file's paths get its folder as prefix (``fastapi-docs=FILE`` turns
    ``tutorial/x.md`` into ``fastapi-docs/tutorial/x.md``)."""
    out = ["question\texpected_path\talternates\tkind\tanswer\tsplit"]
    for spec in args.sets:
        prefix, sep, name = spec.partition("=")
        if not sep or not prefix or not name:
            raise SystemExit(f"agent_bench: {spec!r} is not FOLDER=FILE")
        held = prefix in args.held_out
        for q in read_questions(Path(name)):
            alternates = ",".join(f"{prefix}/{a}" for a in q.alternates)
            split = HELD_OUT if held else q.split
            out.append("\t".join([q.text, f"{prefix}/{q.expected}", alternates, q.kind,
                                  q.answer, split]))  # fmt: skip
    args.out.write_text("\n".join(out) + "\n", encoding="utf-8")
    print(f"agent_bench: {len(out) - 1} questions in {args.out}")


# --- command line ----------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__[__doc__.index("Examples:") :],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = ap.add_subparsers(dest="sub", required=True)
    s = sub.add_parser("setup", help="write the sessions (and mount the store for the mount arm)")
    s.add_argument("--collection", type=Path, required=True, help="the source folder")
    s.add_argument("--store", type=Path, required=True, help="its semfs store (collection docs)")
    s.add_argument("--questions", type=Path, required=True, help="the doc-questions TSV")
    s.add_argument("--work", type=Path, required=True, help="where the sessions go")
    s.add_argument("--arms", default=",".join(ARMS), help="comma-separated [default: all]")
    s.add_argument("--mode", choices=("single", "many"), default="single",
                   help="one question per session (default), or one session for all")  # fmt: skip
    s.add_argument("--only", help="question ids, comma-separated (q01,q05)")
    s.add_argument("--split", choices=("tuned", HELD_OUT), help="only these questions")
    s.add_argument(
        "--subject",
        choices=tuple(SUBJECTS),
        default="docs",
        help="what the collection is: documentation, or a source tree (code)",
    )
    s.add_argument("--semfs", default=default_semfs(), help="the semfs command to measure")
    s.add_argument("--mount-options", help="more `semfs mount` options, one string")
    s.add_argument("--mcp-structured", action="store_true",
                   help="mcpcall also prints each result's structured content (as clients "
                   "that show it to the model do)")  # fmt: skip
    s.add_argument("--max-output", type=int, default=MAX_OUTPUT,
                   help=f"bytes of a command's output shown [default: {MAX_OUTPUT}]")  # fmt: skip
    s.add_argument("--command-timeout", type=float, default=COMMAND_TIMEOUT)
    s.set_defaults(fn=setup)
    e = sub.add_parser("exec", help="(the wrapper) run one command of a session and log it")
    e.add_argument("--session", type=Path, required=True)
    e.add_argument("argv", nargs=argparse.REMAINDER)
    e.set_defaults(fn=run_command)
    a = sub.add_parser("answer", help="(the answer helper) record a session's answer")
    a.add_argument("--session", type=Path, required=True)
    a.add_argument("--id", help="the question, in a many-questions session")
    a.add_argument("path")
    a.add_argument("line", nargs="?", default="")
    a.set_defaults(fn=give_answer)
    m = sub.add_parser("mcpcall", help="(the MCP arm's client) call one tool of `semfs mcp`")
    m.add_argument("--work", type=Path, required=True)
    m.add_argument("--list", action="store_true")
    m.add_argument("tool", nargs="?")
    m.add_argument("json", nargs="?")
    m.set_defaults(fn=mcpcall)
    c = sub.add_parser("score", help="commands, bytes and right pages per arm, from the logs")
    c.add_argument("--work", type=Path, required=True)
    c.add_argument("--json", type=Path, help="also write the figures as JSON here")
    c.add_argument("--markdown", type=Path, help="also write the tables here")
    c.set_defaults(fn=score)
    g = sub.add_parser("merge", help="several question files as one, paths under FOLDER/")
    g.add_argument("sets", nargs="+", metavar="FOLDER=FILE")
    g.add_argument("--out", type=Path, required=True)
    g.add_argument("--held-out", action="append", default=[], metavar="FOLDER",
                   help="every question of this set is held out (repeatable)")  # fmt: skip
    g.set_defaults(fn=merge)
    t = sub.add_parser("stop", help="unmount the mount arm's mount")
    t.add_argument("--work", type=Path, required=True)
    t.set_defaults(fn=stop)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    code = args.fn(args)
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    sys.exit(main())
