"""semfs fusefs: the read-only FUSE filesystem over a semfs store (reads via semfs.ingest.store).

It opens its store through :class:`semfs.ingest.store.owner.StoreOwner`, never by backend class.

* :mod:`semfs.fusefs.bindings`: the FUSE bindings (mfusepy, else fusepy), imported in one place.
* :mod:`semfs.fusefs.tree`: the immutable directory tree built from the document records, and
  the path -> inode map that outlives trees.
* :mod:`semfs.fusefs.reader`: document bytes by range, through a bounded chunk cache.
* :mod:`semfs.fusefs.searchdir`: ``<dir>/.search/<question>/``: search results as directories.
* :mod:`semfs.fusefs.ops`: the FUSE callbacks, a thin translation onto tree, reader and searchdir.
* :mod:`semfs.fusefs.refresh`: rebuilding the tree when the store changes (live ingest).
* :mod:`semfs.fusefs.daemon`: mount lifecycle: checks, daemonizing, ready signal, unmounting.
* :mod:`semfs.fusefs.commands`: ``semfs mount`` / ``semfs umount`` (click); :mod:`semfs.fusefs.cli`:
  the console script, which starts a plain ``semfs mount`` without click
  (:mod:`semfs.fusefs.fastmount`);
  :mod:`semfs.fusefs.mounthelper`: ``mount.semfs`` for ``mount -t semfs`` and /etc/fstab.
"""
