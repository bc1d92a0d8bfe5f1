"""Two collections of one store on different models, for the tests of several collections:
``handbook`` (prose, the hash stand-in at 384 dimensions) and ``secretrepo`` (code and a
README, the hash stand-in at 64), each with words the other never uses."""

from __future__ import annotations

from pathlib import Path

from semfs.ingest.pipeline import ingest
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store

MODELS = {"handbook": "hash", "secretrepo": "hash:64"}
FILES = {
    "handbook": {
        "guide/keys.md": "# Rotating API keys\n\nTo rotate an API key, open Settings and "
        "choose Rotate key.\nThe old key stops working after one hour.\n",
        "faq.md": "# FAQ\n\nBilling questions go to the billing page.\n",
    },
    "secretrepo": {
        "src/upload.py": 'def retry_upload(chunk):\n    """Retry a zebrafish upload after a '
        'network error."""\n    return send(chunk)\n',
        "README.md": "# Zebrafish uploader\n\nUploads zebrafish images to the lab.\n",
    },
}


def two_collections(root: Path) -> Path:
    """``root/store`` holding both collections (their sources in ``root/NAME``)."""
    store = root / "store"
    for name, files in FILES.items():
        for rel, text in files.items():
            path = root / name / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        with open_store(CollectionAddress(name, store=store)) as s:
            ingest(root / name, s, model=MODELS[name])
    return store
