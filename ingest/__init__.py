"""semfs ingest: the library. Documents -> chunks -> Qdrant (embedded Qdrant Edge or a server),
and a question -> the documents and lines that answer it.

Data flows one way: this package writes the store; ``semfs.fusefs`` reads it through
:mod:`semfs.ingest.store`. Nothing here imports ``semfs.fusefs``, click or FUSE bindings.

* :mod:`semfs.ingest.collection`: the Python API, ``open_collection(address)`` (see
  docs/python-api.md).
* The two values every layer passes: :class:`~semfs.ingest.store.address.CollectionAddress`
  (where a collection lives, and its local folder) and
  :class:`~semfs.ingest.request.SearchRequest` (one search, its defaults and checks).
* :mod:`semfs.ingest.store`: the store interface, its schema and manifest, the backends table,
  the Qdrant core and the embedded engine (``store/edge/``), the owner's socket; imports
  nothing else of ingest but errors and :mod:`semfs.ingest.portable`.
* :mod:`semfs.ingest.formats`: a file's bytes -> text, one module per format, one table.
* :mod:`semfs.ingest.embedding`: the dense models (torch, ONNX Runtime).
* the pipeline here: ``sources`` (files, skip reasons) -> ``chunking`` (exact byte spans) ->
  ``embedding`` -> ``pipeline`` (incremental, atomic); ``watch``, ``follow`` and
  ``syncstate`` follow a folder; ``resident`` holds a long-running process's store;
  ``status`` says what a collection holds.
* :mod:`semfs.ingest.search`: a question -> ranked documents, and the lines that answer.
* :mod:`semfs.ingest.portable`: every call that differs by operating system.
"""

__version__ = "0.1.0"
