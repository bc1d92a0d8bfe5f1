"""The embedded engine: Qdrant Edge in this process, one shard folder per collection.

What only the embedded store needs lives here, apart from the backend-neutral store layer
(the interface, the schema, the manifest format, the Qdrant core, the catalog interface, the
owner's socket):

* :mod:`.store`: :class:`~.store.EdgeStore` and its :class:`~.store.EdgeEngine` adapter;
* :mod:`.catalog`: the collections of a store folder;
* :mod:`.manifest_file`: the tree manifest as a file beside the shard;
* :mod:`.shardlock`: the collection's lock and the note saying who holds it;
* :mod:`.shardprobe`: opening a possibly damaged shard in a child process first;
* :mod:`.warming`, :mod:`.mapped`: the page cache and the process's mapped pages;
* :mod:`.privacy`, :mod:`.durable`: owner-only folders, crash-safe writes.

Nothing here is imported at this package's import, and only
:mod:`semfs.ingest.store.backends` (lazily, when it opens an embedded store) reaches into it
from the rest of the library (``tests/test_structure.py`` checks).
"""
