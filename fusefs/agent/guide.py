"""The agent guide: what an agent needs in its system prompt to use a semfs mount well.

Printed by ``semfs guide [MOUNTPOINT]`` and shown in the README; the text is the product's
advice, so it names only behaviour the mount has (see :mod:`semfs.fusefs.view.searchdir`).
"""

from __future__ import annotations

PLACEHOLDER = "DOCS"

GUIDE = """\
The documentation is mounted read-only at DOCS: a plain directory tree (ls, cat, grep,
sed and find work). Search it first, then read:

1. Ask a question as a folder name and read the results file:
     cat "DOCS/.search/rotate api key/00-results.md"
   Write the query in the docs' own words, a few of them (the feature, setting or
   error message, not the story of what broke), and search the product's folder
   when you know it: DOCS/DIR/.search/QUERY/ finds only documents under DIR.
2. The file lists the best documents, one a line: rank, path, match 0-1 (strong >= 0.5,
   fair >= 0.2, else weak) and title; then the lines that best answer, each numbered as
   in the file ("41: ..."), under [its section]. Often the answer is there: stop.
3. To see more around a line, widen by line numbers: sed -n '35,60p' DOCS/PATH.
   The entries 01-NAME, 02-NAME, ... in the folder link to the whole documents.
   A PDF, Word, PowerPoint, HTML or EPUB file is read as its text view beside it
   (report.pdf.md): hits name its page or slide, and grep -n '^## Page' finds the pages.
4. Options are folders before the question, in any order:
     @more     lines from more of the hits                  @full  whole passages
     @keyword  exact words: names, flags, error messages   @semantic  meaning only
     @k=N      N documents (default 5)                       @min=X drop hits below X
   e.g. cat "DOCS/.search/@keyword/@k=3/ERR_TOO_MANY_REDIRECTS/00-results.md"
5. The question is one file name: write "/" as "\u2215" (U+2215) or "\uff0f" (U+FF0F);
   at most 255 bytes. Start it with a space if it starts with "." or "@".
6. If every match is weak, reword with the words the docs would use, try @keyword, or
   grep -rn WORD DOCS. .search is never listed: name it to use it.
"""


SEARCH_DIR = ".search"


def guide(mountpoint: str | None = None, search_dir: str = SEARCH_DIR) -> str:
    """The guide, with ``mountpoint`` (default: a placeholder) where the mount is and
    ``search_dir`` as the search folder's name (``semfs mount --search-dir``)."""
    text = GUIDE.replace(SEARCH_DIR, search_dir)
    return text.replace(PLACEHOLDER, mountpoint.rstrip("/") or "/") if mountpoint else text
