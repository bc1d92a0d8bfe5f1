"""Two collections of one store on different models, for the tests of several collections:
``handbook`` (prose, the hash stand-in at 384 dimensions) and ``secretrepo`` (code and a
README, the hash stand-in at 64), each with words the other never uses."""

from __future__ import annotations

import shutil
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
        ingest_tree(root, store, name, files, MODELS[name])
    return store


def ingest_tree(root: Path, store: Path, name: str, files: dict[str, str], model: str) -> None:
    """``files`` (path: text) written under ``root/name`` and ingested as collection ``name``
    of ``store``."""
    for rel, text in files.items():
        path = root / name / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    with open_store(CollectionAddress(name, store=store)) as s:
        ingest(root / name, s, model=model)


# A keyword search of two collections (tests/unit/search/test_several_keywords.py).
QUESTION = "roll back a failed deploy"
# handbook: every page is about deploys, one answers the question; its words are common there,
# so each page's BM25 score is close to the next and the answer stands out little from its own
# candidates. notes: its pages share one everyday word with the question ("failed"), and one
# of them says it once in a shorter text, so it stands out from its own candidates.
KEYWORD_FILES = {
    "handbook": {
        "deploy/rollback.md": "# Roll back a deploy\n\nTo roll back a failed deploy, run the "
        "rollback command with the release id. The previous release serves traffic again "
        "within a minute.\n",
        **{
            f"deploy/step{i}.md": f"# Deploy step {i}\n\n"
            + "A failed deploy can roll back. " * (i % 3 + 1)
            + "Words about the release bundle and the build cache. " * (6 - i % 4)
            + "\n"
            for i in range(8)
        },
    },
    "notes": {
        "meeting.md": "# Meeting notes\n\nWe talked about the failed printer and lunch.\n",
        **{
            f"misc/n{i}.md": f"# Note {i}\n\nThe printer failed again on floor {i}; "
            "lunch was late.\n"
            for i in range(6)
        },
    },
}


def keyword_collections(root: Path) -> Path:
    """``root/store`` with handbook and notes, and ``both``: one collection of the two trees
    (hash stand-in model: a keyword search reads no vectors)."""
    store = root / "store"
    for name, files in KEYWORD_FILES.items():
        ingest_tree(root, store, name, files, "hash")
        shutil.copytree(root / name, root / "both" / name)
    with open_store(CollectionAddress("both", store=store)) as s:
        ingest(root / "both", s, model="hash")
    return store
