"""Search queries embedded by the store's owner: `semfs search` beside a mount needs no model.

An owner that embeds queries (a mount, ``semfs mcp``, ``semfs ingest --watch``) says so when a
client connects; :func:`owner_embedder` then gives a :class:`~semfs.ingest.search.Searcher` an
embedder that asks the owner for each query's vector, so the rankings are a local search's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from semfs.ingest.errors import SemfsError
from semfs.ingest.store import OwnerLink, StoreReader

logger = logging.getLogger(__name__)


class OwnerEmbedder:
    """Embeds queries with the model of the process that owns the store (over its socket),
    for a :class:`~semfs.ingest.search.Searcher` whose store is that owner's
    (:func:`owner_embedder`). Should the owner fail to answer, ``fallback()`` makes a local
    query embedder, used from then on (logged once). Documents are never embedded here."""

    def __init__(
        self, owner: OwnerLink, where: str, name: str, fallback: Callable[[], Any]
    ) -> None:
        self.name = name
        self.owner, self.where = owner, where
        self._fallback = fallback
        self._local: Any = None
        self._lock = threading.Lock()

    @property
    def query_backend(self) -> str:
        if self._local is not None:
            return str(getattr(self._local, "query_backend", "this process's model"))
        return f"{self.owner.query_backend}, in the owner (pid {self.owner.pid})"

    @property
    def loaded(self) -> bool:
        return True  # the owner's model is warm, or loads there

    def _local_embedder(self) -> Any:
        with self._lock:
            if self._local is None:
                self._local = self._fallback()
            return self._local

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> list[list[float]]:
        if self._local is None:
            try:
                return [self.owner.embed_query(t) for t in texts]
            except SemfsError as exc:
                logger.warning(
                    "the owner of %s cannot embed queries (%s): embedding them here",
                    self.where,
                    exc,
                )
        result: list[list[float]] = self._local_embedder().encode(texts, batch_size)
        return result

    @property
    def dimension(self) -> int:
        return int(self._local_embedder().dimension)

    @property
    def max_tokens(self) -> int:
        return int(self._local_embedder().max_tokens)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        counts: list[int] = self._local_embedder().count_tokens(texts)
        return counts


def owner_embedder(
    store: StoreReader, name: str, fallback: Callable[[], Any]
) -> OwnerEmbedder | None:
    """An :class:`OwnerEmbedder` when ``store``'s owner embeds queries, else None."""
    owner = store.owner_link()
    if owner is not None and owner.query_backend is not None:
        return OwnerEmbedder(owner, store.address, name, fallback)
    return None
