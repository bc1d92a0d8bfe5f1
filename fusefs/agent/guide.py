"""The agent guide: what an agent needs in its system prompt to use a semfs mount well.

Printed by ``semfs guide [MOUNTPOINT]`` and shown in the README; the text is the product's
advice, so it names only behaviour the mount has (see :mod:`semfs.fusefs.view.searchdir`).
Its option lines and their defaults come from the table of ``@`` folders
(:mod:`semfs.fusefs.view.parameters`), and ``.search`` is the search folder's default name
(``DEFAULT_NAME``), both as the mount has them.
"""

from __future__ import annotations

from collections.abc import Sequence

from semfs.fusefs.view.foldermap import MAP_NAME
from semfs.fusefs.view.parameters import RESULTS_NAME, parameter_lines
from semfs.fusefs.view.searchdir import DEFAULT_NAME

PLACEHOLDER = "DOCS"

GUIDE = f"""\
The documentation is mounted at DOCS: a plain directory tree (ls, cat, grep, sed and
find work). Search it first, then read (a map first if it is new to you):

0. When you do not know the collection, read its map first (about 2 KB, never listed):
     cat DOCS/{MAP_NAME}
   It names each folder with how many documents it holds, and the folder's documents
   with title and description; every folder has one (DOCS/DIR/{MAP_NAME}). Then search
   the folder that fits, rather than listing every file.
1. Ask a question as a folder name and read the results file:
     cat "DOCS/{DEFAULT_NAME}/rotate api key/{RESULTS_NAME}"
   Write the query in the docs' own words, a few of them (the feature, setting or
   error message, not the story of what broke), and search the product's folder
   when you know it: DOCS/DIR/{DEFAULT_NAME}/QUERY/ finds only documents under DIR.
2. The file starts with the best answer: "Answer: 1. PATH lines 41-44 [its section]" and
   those lines, numbered as in the file ("41: ..."). Then the best documents, one a line:
   rank, path, match 0-1 (strong >= 0.5, fair >= 0.2, else weak) and title; then more
   of their lines. When the Answer's hit is strong and its lines say what you asked,
   that is enough: stop. Else the other lines, then step 3.
3. To check or widen an answer, read a few lines by number, never the whole page:
     sed -n '38,46p' DOCS/PATH        (the lines around a hit's line)
     grep -n '^#' DOCS/PATH           (the page's outline: its headings)
     grep -n 'WORD' DOCS/PATH | head  (where the page says WORD)
   @more shows more lines of the same hits (about 3 KB): ten lines read are less.
   The entries 01-NAME, 02-NAME, ... in the folder link to the whole documents.
   Pages like one you found: ls "DOCS/.similar/PATH/" (a folder like a question's).
   A PDF, Word, PowerPoint, HTML or EPUB file is read as its text view beside it
   (report.pdf.md): hits name its page or slide, and grep -n '^## Page' finds the pages.
   In source code a hit names the definition its lines are in, signature first:
   "## 1. src/upload.py:120 · class Uploader › def retry_upload". Where a name is
   defined, in one read: cat "DOCS/{DEFAULT_NAME}/@symbol/retry_upload/{RESULTS_NAME}"
   (Class.method for a method); what calls it: grep -rn 'retry_upload(' DOCS | head.
4. Options are folders before the question, in any order (a later one wins):
{parameter_lines(indent=5)}
   e.g. cat "DOCS/{DEFAULT_NAME}/@keyword/@k=3/ERR_TOO_MANY_REDIRECTS/{RESULTS_NAME}"
5. The question is one file name: write "/" as "\u2215" (U+2215) or "\uff0f" (U+FF0F);
   at most 255 bytes. Start it with a space if it starts with "." or "@".
6. If every match is weak, reword with the words the docs would use, try @keyword, or
   grep -rn WORD DOCS. {DEFAULT_NAME} and {MAP_NAME} are never listed: name them to use them.
7. If DOCS is writable (semfs mount --watch DIR --writable), keep your notes and long
   command outputs in a folder of it rather than in context, then search them:
     make test > DOCS/notes/test.log 2>&1
     cat "DOCS/notes/{DEFAULT_NAME}/failing test/{RESULTS_NAME}"
   A file is searchable about a second after it is closed. Over MCP: the write tool.
"""


# A mount of several collections (semfs mount --collections): said before the steps.
SEVERAL = f"""\
It holds several collections, each a folder: COLLECTIONS.
DOCS/{DEFAULT_NAME}/QUERY/ searches them all (the first hit from the collection nearest the
question); DOCS/NAME/{DEFAULT_NAME}/QUERY/ searches collection NAME only, and DOCS/{MAP_NAME}
says what each holds. A hit's path starts with its collection's name.
"""


def guide(
    mountpoint: str | None = None,
    search_dir: str = DEFAULT_NAME,
    collections: Sequence[str] = (),
) -> str:
    """The guide, with ``mountpoint`` (default: a placeholder) where the mount is and
    ``search_dir`` as the search folder's name (``semfs mount --search-dir``);
    ``collections``: the top-level folders of a mount of several."""
    text = GUIDE
    if collections:
        folders = ", ".join(f"{PLACEHOLDER}/{name}/" for name in collections)
        several = SEVERAL.replace("COLLECTIONS", folders)
        text = text.replace("\n0. ", f"\n{several}0. ", 1)
    text = text.replace(DEFAULT_NAME, search_dir)
    return text.replace(PLACEHOLDER, mountpoint.rstrip("/") or "/") if mountpoint else text
