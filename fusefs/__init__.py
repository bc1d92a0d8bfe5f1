"""semfs's front ends: what people, scripts and agents use, all on the :mod:`semfs.ingest` library.

Imports go down only: the library, then ``view``, then the three front ends.

* :mod:`semfs.fusefs.view`: the FUSE-free view of a collection that the mount and the agent
  tools both read: the immutable tree, document bytes by range, open versions kept, following
  store changes, and ``.search/QUESTION/`` folders. Neither click nor a FUSE binding.
* :mod:`semfs.fusefs.mount`: the kernel mount: the FUSE bindings (imported there only), the
  callbacks (a thin translation with precise errno), the permission check, kernel-cache
  invalidation, the daemon's lifecycle.
* :mod:`semfs.fusefs.agent`: agents without a mount: the tools, their MCP server, tokens,
  grep and the guide. Reaches no FUSE binding.
* :mod:`semfs.fusefs.cli`: the ``semfs`` command (click, imported there only); a plain
  ``semfs mount`` starts without click; and ``mount.semfs``, the helper mount(8) runs.

A front end opens its store through :class:`semfs.ingest.resident.ResidentStore` (own it, or go
through its owner's socket; serve, warm, stop), never by backend class.
"""
