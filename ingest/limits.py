"""The largest file a source folder passes on, by default (``--max-bytes``).

Its own module, importing nothing: the options table of a plain `semfs mount`
(:mod:`semfs.fusefs.cli.options`) shows it, and a mount's start must not import the reading
machinery (:mod:`semfs.ingest.sources`, the formats, ``zipfile``) for one number.
"""

DEFAULT_MAX_BYTES = 10 * 1024 * 1024
