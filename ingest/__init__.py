"""semfs ingest: documents -> chunks -> Qdrant (embedded Qdrant Edge or a Qdrant server).

Data flows one way: this package writes the store; ``semfs.fusefs`` reads it through
:mod:`semfs.ingest.store`. Nothing here imports ``semfs.fusefs`` or FUSE bindings.

* :mod:`semfs.ingest.store`: the store interface, its schema and manifest, the two backends
  and their support (the owner's socket, checks, disk space); imports nothing else of ingest.
* :mod:`semfs.ingest.formats`: a file's bytes -> text, one module per format, one table.
* the pipeline here: ``sources`` (files, skip reasons) -> ``chunking`` (exact byte spans) ->
  ``embedder``/``onnx_embedder`` -> ``pipeline`` (incremental, atomic); ``watch`` and
  ``syncstate`` follow a folder.
* :mod:`semfs.ingest.search`: a question -> ranked documents, and the lines that answer.
* ``cli``: the store commands.
"""

__version__ = "0.1.0"
