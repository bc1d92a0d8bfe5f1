"""The owner's store socket: `semfs ingest` works while `semfs mount` owns the shard.

Qdrant Edge locks its WAL, so one process at a time opens an embedded shard. While a mount (or
``semfs mcp``, or ``semfs ingest --watch``) runs, it is that process, the store's owner; it
serves its :class:`~semfs.ingest.store.Store` on ``COLLECTION/daemon.sock``
(:class:`.server.StoreServer`), and a process that finds the shard owned sends its calls there
instead (:func:`.client.connect_daemon` returns a :class:`.client.RemoteStore`).

* :mod:`.wire`: framing, the methods a peer may call, error classes by name, socket addresses;
  the socket's file name (:data:`.wire.SOCKET_NAME`).
* :mod:`.server`: the owner's side (authentication, one writer at a time, query embedding).
* :mod:`.client`: everyone else's side, a Store whose calls cross the socket.

The owner's query embedder for a client's searches is
:mod:`semfs.ingest.embedding.owner`. Nothing is imported here: :mod:`.wire` stays cheap for
:mod:`semfs.ingest.store.backends`, which looks for the socket on every open.
"""
