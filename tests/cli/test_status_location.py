"""`semfs status --json` names where the store is as data (issue 30): beside an owner, the
location is the collection's folder and the owner's pid is a field of its own, not prose."""

from __future__ import annotations

import json
import os
from pathlib import Path

from click.testing import CliRunner

from semfs.fusefs.cli.group import cli
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.owner import StoreOwner
from tests.helpers.mounting import ingest_hash


def _status(store: Path) -> dict[str, object]:
    out = CliRunner().invoke(cli, ["status", "--json", "--store", str(store)])
    assert out.exit_code == 0, out.output
    return json.loads(out.output)


def test_status_json_location_is_a_path_beside_an_owner(sample_copy: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    ingest_hash(sample_copy, store)
    alone = _status(store)
    assert alone["served_by"] is None
    assert Path(str(alone["location"])).is_dir()
    with StoreOwner.open(CollectionAddress(store=store)) as owner:
        owner.serve()
        served = _status(store)
        text = CliRunner().invoke(cli, ["status", "--store", str(store)]).output
        owner.stop_serving()
    # The same folder either way; who relays the calls is its own field...
    assert served["location"] == alone["location"]
    assert served["served_by"] == os.getpid()
    assert f"pid {os.getpid()}" in str(served["through"])
    # ...and a person still reads it on the location line.
    assert f"pid {os.getpid()}" in text
