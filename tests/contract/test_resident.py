"""ResidentStore, the one owner lifecycle of the front ends: the first process owns the store and
serves it (writes, queries, whole searches), a second goes through its socket, a mount refuses
to, and closing stops the service before the store. Real Edge stores and sockets."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from semfs.ingest.errors import StoreOwnedError
from semfs.ingest.request import SearchRequest
from semfs.ingest.resident import ResidentStore
from semfs.ingest.search import Searcher
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.ipc.client import RemoteStore
from tests.helpers import SAMPLE_CORPUS
from tests.helpers.mounting import ingest_hash


def test_one_owner_serves_and_the_next_goes_through_its_socket(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ingest_hash(SAMPLE_CORPUS, store)
    with ResidentStore.open(CollectionAddress(store=store)) as owner:
        assert owner.owned and owner.store.owner_link() is None
        local = Searcher(owner.store)
        owner.serve(searcher=lambda: local)
        owner.warm(lambda: local)
        with ResidentStore.open(CollectionAddress(store=store)) as guest:
            link = guest.store.owner_link()
            assert not guest.owned and link is not None
            assert link.searches and link.query_backend is not None
            guest.serve()  # a no-op through a socket
            hits = Searcher(guest.store).search(SearchRequest("custom domain", k=3))
            assert hits == local.search(SearchRequest("custom domain", k=3))
        with pytest.raises(StoreOwnedError) as info:
            ResidentStore.open(
                CollectionAddress(store=store), through_owner=False
            )  # a mount never stacks on an owner
        assert info.value.holder
        owner.stop_serving()
        assert not (store / "docs" / "daemon.sock").exists()
        owner.close()
        owner.close()  # idempotent
    with ResidentStore.open(
        CollectionAddress(store=store)
    ) as again:  # the store is free once closed
        assert again.owned


def test_serving_imports_no_search_engine_until_a_query_comes(tmp_path: Path) -> None:
    """A mount serves before its first listing answers: the search package (ranking,
    excerpts) is imported at the first query from another process, not by serve()."""
    store = tmp_path / "store"
    ingest_hash(SAMPLE_CORPUS, store)
    code = (
        "import sys\n"
        "from semfs.ingest.resident import ResidentStore\n"
        "from semfs.ingest.store.address import CollectionAddress\n"
        f"resident = ResidentStore.open(CollectionAddress(store={str(store)!r}))\n"
        "resident.serve(searcher=lambda: None)\n"
        "print('semfs.ingest.search' in sys.modules)\n"
        "resident.close()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out.split() == ["False"]


def test_a_client_of_an_ingest_takes_the_store_over_when_it_ends(tmp_path: Path) -> None:
    """The hand-over (issue 38.4): a resident client of a plain `semfs ingest` (the owner
    here is a process that says it is one) goes on when that ingest ends: its next call owns
    the store, and it serves as it was asked to."""
    store = tmp_path / "store"
    ingest_hash(SAMPLE_CORPUS, store)
    gate = tmp_path / "done"
    code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        f"sys.argv = ['semfs', 'ingest', 'SRC', '--store', {str(store)!r}]\n"
        "from semfs.ingest.resident import ResidentStore\n"
        "from semfs.ingest.store.address import CollectionAddress\n"
        f"with ResidentStore.open(CollectionAddress(store={str(store)!r})) as resident:\n"
        "    resident.serve()\n"
        "    print('serving', flush=True)\n"
        f"    while not Path({str(gate)!r}).exists():\n"
        "        time.sleep(0.05)\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None and owner.stdout.readline() == "serving\n"
        with ResidentStore.open(CollectionAddress(store=store)) as client:
            assert not client.owned
            before = sorted(d.path for d in client.store.list_documents())
            client.serve()  # remembered: done when it takes the store over
            gate.touch()
            assert owner.wait(timeout=60) == 0
            assert sorted(d.path for d in client.store.list_documents()) == before
            assert client.owned and (store / "docs" / "daemon.sock").exists()
            # Through the new owner's socket:
            with ResidentStore.open(CollectionAddress(store=store)) as third:
                assert not third.owned and isinstance(third.store, RemoteStore)
                assert (link := third.store.owner_link()) is not None and link.pid == os.getpid()
    finally:
        gate.touch()
        owner.kill()
        owner.wait()


@pytest.mark.parametrize("noted", [True, False], ids=["its-note", "no-note"])
def test_a_newcomer_waits_for_an_owner_that_is_starting_or_closing(
    tmp_path: Path, noted: bool
) -> None:
    """A semfs owner holds the lock without a socket while it starts and while it closes (a
    stdio `semfs mcp` whose client has left finishes its dense pass's window first). Before,
    a `semfs mcp` or mount started in that moment failed with "store ... is in use by pid N
    (semfs mcp ...)"; seen when an agent's next tool call started the next stdio server. Now
    it waits for the lock and owns the store. ``no-note``: the holder has no note yet or any
    more (between its lock and its note while it starts; between taking its note back and
    letting go while it closes): a newcomer that met that moment was refused at once, "in use
    by another process" (CI, under load)."""
    import threading

    store = tmp_path / "store"
    ingest_hash(SAMPLE_CORPUS, store)
    gate = tmp_path / "go"
    code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        f"sys.argv = ['semfs', 'mcp', '--store', {str(store)!r}]\n"
        "from semfs.ingest.store.address import CollectionAddress\n"
        "from semfs.ingest.store.owner import StoreOwner\n"
        f"owner = StoreOwner.open(CollectionAddress(store={str(store)!r}))\n"
        + ("" if noted else f"Path({str(store / 'docs' / 'owner.json')!r}).unlink()\n")
        + "print('held', flush=True)\n"  # locked, serving nothing: as one starting or closing
        f"while not Path({str(gate)!r}).exists():\n"
        "    time.sleep(0.05)\n"
        "owner.close()\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    got: list[object] = []
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"

        def newcomer() -> None:
            try:
                resident = ResidentStore.open(CollectionAddress(store=store))
            except Exception as exc:  # what the test reports
                got.append(exc)
                return
            got.append(resident.owned)
            resident.close()

        thread = threading.Thread(target=newcomer)
        thread.start()
        thread.join(1.0)
        assert thread.is_alive() and not got, got  # waiting, not refused
        gate.touch()
        assert holder.wait(timeout=60) == 0
        thread.join(60)
        assert got == [True]
    finally:
        gate.touch()
        holder.kill()
        holder.wait()


def test_a_holder_that_never_serves_is_said_at_once(tmp_path: Path) -> None:
    """The wait above is for semfs owners only: a store held by a script (the Python API, a
    test) is refused at once with who holds it, not after the hand-over's 60 s."""
    import threading

    from semfs.ingest.errors import StoreLockedError

    store = tmp_path / "store"
    ingest_hash(SAMPLE_CORPUS, store)
    gate = tmp_path / "go"
    code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "sys.argv = ['notebook.py']\n"
        "from semfs.ingest.store.address import CollectionAddress\n"
        "from semfs.ingest.store.owner import StoreOwner\n"
        f"owner = StoreOwner.open(CollectionAddress(store={str(store)!r}))\n"
        "print('held', flush=True)\n"
        f"while not Path({str(gate)!r}).exists():\n"
        "    time.sleep(0.05)\n"
        "owner.close()\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    got: list[object] = []
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"

        def newcomer() -> None:
            try:
                ResidentStore.open(CollectionAddress(store=store)).close()
                got.append("opened")
            except StoreLockedError as exc:
                got.append(exc)

        thread = threading.Thread(target=newcomer, daemon=True)
        thread.start()
        thread.join(30)  # refused in milliseconds; a wait would last 60 s
        assert len(got) == 1 and isinstance(got[0], StoreLockedError), got
        assert f"in use by pid {holder.pid} (notebook.py)" in str(got[0])
    finally:
        gate.touch()
        holder.kill()
        holder.wait()
