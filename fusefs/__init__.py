"""semfs fusefs: the read-only FUSE filesystem over a semfs store (reads via ingest.store).

It opens its store through :class:`ingest.owner.StoreOwner`, never by backend class.

* :mod:`fusefs.bindings`: the FUSE bindings (mfusepy, else fusepy), imported in one place.
* :mod:`fusefs.tree`: the immutable directory tree built from the document records, and
  the path -> inode map that outlives trees.
* :mod:`fusefs.reader`: document bytes by range, through a bounded chunk cache.
* :mod:`fusefs.searchdir`: ``<dir>/.search/<question>/``: search results as directories.
* :mod:`fusefs.ops`: the FUSE callbacks, a thin translation onto tree, reader and searchdir.
* :mod:`fusefs.refresh`: rebuilding the tree when the store changes (live ingest).
* :mod:`fusefs.daemon`: mount lifecycle: checks, daemonizing, ready signal, unmounting.
* :mod:`fusefs.commands`: ``semfs mount`` / ``semfs umount`` (click); :mod:`fusefs.cli`: the
  console script, which starts a plain ``semfs mount`` without click (:mod:`fusefs.fastmount`);
  :mod:`fusefs.mounthelper`: ``mount.semfs`` for ``mount -t semfs`` and /etc/fstab.
"""
