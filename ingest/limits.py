"""The largest file a source folder passes on, by default (``--max-bytes``), and the longest
file name a mount shows (``NAME_MAX``).

Its own module, importing nothing: the options table of a plain `semfs mount`
(:mod:`semfs.fusefs.cli.options`) shows the first, the mount's tree checks names against the
second, and a mount's start must import neither the reading machinery
(:mod:`semfs.ingest.sources`, the formats, ``zipfile``) nor the search package (which loads the
Qdrant engine) for one number.
"""

DEFAULT_MAX_BYTES = 10 * 1024 * 1024

# The longest file name, in bytes: what statfs promises, and Linux's limit. The results
# file's link names and a `.search/` query are cut or refused by it.
NAME_MAX = 255
