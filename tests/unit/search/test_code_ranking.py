"""Code search that beats grep (issue 47): a question's plain words find joined identifiers,
the implementation outranks a test and a type declaration that repeat its words, and a code
hit's excerpt is the answering line inside the definition, not its first lines.

A real Edge store, the real chunker and BM25 (hash embedder: keyword mode needs no model).
"""

from __future__ import annotations

from pathlib import Path

from semfs.ingest.pipeline import ingest
from semfs.ingest.request import SearchRequest
from semfs.ingest.search import Hit, Searcher
from semfs.ingest.search.excerpts import ExcerptPicker
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.bm25 import code_keyword_text, identifier_parts
from semfs.ingest.store.schema import ChunkRecord

LOADER = """\
import fs from "fs";

export function load(where) {
  const text = fs.readFileSync(where, "utf8");
  return parseConfigFile(text);
}
"""

NOTES = """\
# Setup

Write the settings in a text file next to the program and start it.
"""

# The implementation says it once; its test and its type declaration repeat the words.
BACKOFF = """\
export function nextWait(attempt, base) {
  // exponential backoff between retries
  return Math.min(base * 2 ** attempt, 30000);
}
"""

BACKOFF_TEST = """\
import { nextWait } from "../lib/backoff.js";

test("exponential backoff between retries", () => {
  // the backoff is exponential: retries wait twice as long
  expect(nextWait(1, 100)).toBe(200);
  expect(nextWait(2, 100)).toBe(400); // exponential backoff between retries
});
"""

BACKOFF_TYPES = """\
/** The exponential backoff between retries: the wait before retry `attempt`. */
export declare function nextWait(attempt: number, base: number): number;
/** Exponential backoff between retries, as a default. */
export declare const defaultBackoff: number;
"""

# The answer (the condition) sits deep in a long definition, its words only in identifiers.
CHANNEL = '''\
class Channel:
    """One connection's request reader."""

    def lineReceived(self, line):
        """Called with each line of the request, headers included."""
        self.lines.append(line)
        if not line:
            self.allLinesDone()
            return
        parts = line.split(b":", 1)
        if len(parts) != 2:
            self.badLine(line)
            return
        self._receivedSize += len(line)
        if self._receivedSize > self.totalHeadersSize:
            self.rejectTooLarge()
            return
        self.store(parts[0].strip(), parts[1].strip())
'''

# The docstring describes the attribute; its value sits lines below, in words of its own.
FACTORY = '''\
class ReconnectingFactory:
    """
    Connects again after a lost connection, waiting longer each time.

    @ivar maxDelay: The longest wait between two connection attempts, in seconds.
    @ivar initialDelay: The first wait.
    @ivar factor: How much each wait grows.
    @ivar jitter: Randomness added to each wait.
    @ivar continueTrying: Whether to go on.
    @ivar connector: The connector in use.
    @ivar clock: The clock that schedules the calls.
    """

    initialDelay = 1.0
    factor = 2.7182818284590451
    jitter = 0.11962656472
    delay = initialDelay
    retries = 0
    maxRetries = None
    _callID = None
    connector = None
    clock = None
    continueTrying = 1
    maxDelay = 3600
'''

RETRY = '''\
class Factory:
    def retry(self, connector=None):
        """
        Have this connector connect again, after a suitable delay.

        The delay grows by the factor each time, up to the longest delay.
        """
        if not self.continueTrying:
            return
        self.retries += 1
        self.delay = min(self.delay * self.factor, self.maxDelay)
        connector.connect()
'''


def _search(tmp_path: Path, files: dict[str, str], query: str, k: int = 3) -> list[Hit]:
    src = tmp_path / "src"
    for name, text in files.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(text)
    with open_store(CollectionAddress(store=tmp_path / "store")) as store:
        ingest(src, store, model="hash")
        return Searcher(store).search(SearchRequest(query, k=k, mode="keyword"))


def _chunks(tmp_path: Path, name: str, text: str) -> list[ChunkRecord]:
    """The chunks of one file ``name`` holding ``text``, as ingested."""
    src = tmp_path / "src"
    src.mkdir()
    (src / name).write_text(text)
    with open_store(CollectionAddress(store=tmp_path / "store")) as store:
        ingest(src, store, model="hash")
        doc = store.get_document(name)
        assert doc is not None
        return store.get_chunks(name, doc.gen, range(doc.chunks))


def test_identifier_parts_keep_the_whole_and_split_the_joined() -> None:
    assert identifier_parts("x = parseConfigFile(HTTPServer, maxRetry2)") == [
        *("parse", "Config", "File", "HTTP", "Server", "max", "Retry", "2"),
    ]
    text = "return parseConfigFile(text)"
    assert code_keyword_text(text) == f"{text}\nparse Config File"
    assert code_keyword_text("plain words only") == "plain words only"


def test_a_configuration_files_keys_are_not_split(tmp_path: Path) -> None:
    """Code search's rules are for programs: a docs site's docs.json keeps its keywords."""
    hits = _search(tmp_path, {"docs.json": '{\n  "theme": "darkMode"\n}\n'}, "dark mode")
    assert hits == []


def test_a_question_word_finds_a_joined_identifier(tmp_path: Path) -> None:
    hits = _search(
        tmp_path, {"lib/loader.js": LOADER, "README.md": NOTES}, "where is the config parsed"
    )
    assert [h.path for h in hits][:1] == ["lib/loader.js"]
    shown = [t for e in hits[0].excerpts for _, t in e.lines]
    assert "  return parseConfigFile(text);" in shown


def test_the_implementation_outranks_its_test_and_type_declaration(tmp_path: Path) -> None:
    files = {
        "lib/backoff.js": BACKOFF,
        "tests/backoff.test.js": BACKOFF_TEST,
        "types/index.d.ts": BACKOFF_TYPES,
    }
    hits = _search(tmp_path, files, "exponential backoff between retries")
    # The test and the declaration still rank, below the code that does it.
    assert hits[0].path == "lib/backoff.js"
    assert sorted(h.path for h in hits[1:]) == ["tests/backoff.test.js", "types/index.d.ts"]
    # Asked about the tests, they are not lowered.
    again = _search(tmp_path / "again", files, "the test of exponential backoff between retries")
    assert again[0].path == "tests/backoff.test.js"


def test_a_code_excerpt_holds_the_answering_condition(tmp_path: Path) -> None:
    hits = _search(tmp_path, {"web/channel.py": CHANNEL}, "total headers size too large")
    shown = {n: t for e in hits[0].excerpts for n, t in e.lines}
    assert shown.get(15) == "        if self._receivedSize > self.totalHeadersSize:"
    best = next(e for e in hits[0].excerpts if e.best)
    assert best.start_line <= 15 <= best.end_line
    # The signature is the label, not the excerpt: the definition names it.
    assert best.definition is not None and best.definition.line == 4
    assert best.heading == "class Channel > def lineReceived"


def test_a_described_constant_is_shown_with_its_value(tmp_path: Path) -> None:
    hits = _search(
        tmp_path,
        {"internet/protocol.py": FACTORY},
        "longest wait between two connection attempts",
    )
    shown = {n: t for e in hits[0].excerpts for n, t in e.lines}
    assert shown.get(5, "").strip().startswith("@ivar maxDelay: The longest wait")
    assert shown.get(24) == "    maxDelay = 3600"


def test_the_code_line_outranks_the_docstring_that_restates_the_question(
    tmp_path: Path,
) -> None:
    chunks = _chunks(tmp_path, "protocol.py", RETRY)
    # Room for one line: the best one.
    picked = ExcerptPicker("how does the delay grow by the factor").pick([chunks], [90])
    assert [e.lines for e in picked[0]] == [
        ((11, "        self.delay = min(self.delay * self.factor, self.maxDelay)"),)
    ]


# The attribute's description runs over two lines; a method uses it with the question's words.
SESSION = '''\
class Session:
    """
    @ivar sessionTimeout: Time after the last touch until it ends: an idle
        session will expire then, in seconds.
    Each visit grows the session store's size by one entry.
    """

    sessionTimeout = 900

    def startCheckingExpiration(self):
        self.expireCall = self.reactor.callLater(self.sessionLength(), self.expire)

    def touch(self):
        size = len(self.visits)
        self.expireCall.reset(self.sessionLength())
'''


def test_an_amount_question_shows_the_value_its_description_continues_to(
    tmp_path: Path,
) -> None:
    chunks = _chunks(tmp_path, "server.py", SESSION)

    def best(query: str) -> tuple[int, str]:  # room for one line: the best one
        return ExcerptPicker(query).pick([chunks], [60])[0][0].lines[0]

    # The description's second line holds the question's words: the value scores with its
    # entry, and an amount is asked, so it outranks the call that holds the words too.
    assert best("how long does a session live before it expires") == (
        8,
        "    sessionTimeout = 900",
    )
    # A plain word (size) in a sentence does not lend a local variable its score.
    assert best("how does each visit grow the session store")[0] == 5


# An interface repeats the implementation's words in its docstrings; its methods do nothing.
REACTOR_INTERFACE = '''\
class IReactorTCP(Interface):
    def listenTCP(port, factory, backlog=50, interface=""):
        """
        Connects a given protocol factory to the given numeric TCP/IP port.

        @param backlog: size of the listen queue of the TCP port, 50 by default
        """

    def connectTCP(host, port, factory, timeout=30):
        """
        Connect a TCP client to the given host and port.
        """
'''

REACTOR = """\
class PosixReactorBase:
    def listenTCP(self, port, factory, backlog=50, interface=""):
        p = tcp.Port(port, factory, backlog, interface, self)
        p.startListening()
        return p
"""


def test_the_implementation_outranks_an_interface_that_repeats_its_words(
    tmp_path: Path,
) -> None:
    """A file's role by what its definitions do, not by its name: bodies beat declarations."""
    files = {"internet/interfaces.py": REACTOR_INTERFACE, "internet/posixbase.py": REACTOR}
    hits = _search(tmp_path, files, "default listen backlog of a TCP port")
    assert [h.path for h in hits] == ["internet/posixbase.py", "internet/interfaces.py"]


# A call and a condition hold the same words of the question; the condition decides.
EXPIRY = """\
class Sessions:
    def close(self):
        self.expireSession(self.session)

    def check(self):
        if self.session.expired:
            self.drop()
"""


def test_a_condition_outranks_a_call_holding_the_same_words(tmp_path: Path) -> None:
    chunks = _chunks(tmp_path, "sessions.py", EXPIRY)
    # Room for one line: the best one. Without the condition's weight the two tie, and the
    # call, the earlier line, came first.
    picked = ExcerptPicker("where is a session expired").pick([chunks], [60])
    assert picked[0][0].lines[0] == (6, "        if self.session.expired:")


# A class docstring long enough to be cut into several chunks, then a method whose own
# docstring restates the question and whose code answers it.
CLOCK = (
    'class Clock:\n    """\n'
    + "".join(
        f"    Sentence {i} of a long description that says a great deal about timers.\n"
        for i in range(60)
    )
    + '''    """

    def next(self):
        """
        Compute when to run next: the interval after the last run.
        """
        when = self.start + self.interval * self.count
        return when
'''
)


def test_a_chunk_cut_inside_a_docstring_keeps_code_and_docstrings_apart(
    tmp_path: Path,
) -> None:
    chunks = _chunks(tmp_path, "clock.py", CLOCK)
    # The search fetched the method's chunk and the one before it, which starts inside the
    # class docstring: its closing quotes must not be read as opening one. Counted over the
    # fetched lines, they were, and the method's docstring scored as code, its code as
    # docstring: the docstring line was shown.
    cut = [c for c in chunks if c.end_line >= 60]
    assert len(cut) < len(chunks) and not cut[0].text.lstrip().startswith(("class", '"""'))
    query = "how is the next run computed from the interval count"
    for fetched in (cut, chunks):
        # Room for one line: the best one.
        picked = ExcerptPicker(query).pick([fetched], [90])
        assert picked[0][0].lines == (
            (69, "        when = self.start + self.interval * self.count"),
        )
