"""The corpora measured: the real documentation folder, slices of it, synthetic Zipf text."""

from __future__ import annotations

import random
import re
import shutil
from pathlib import Path

from .config import Config
from .harness import REPO, SAMPLE_CORPUS, SHARED_CORPUS
from .results import Results

# -- corpora -------------------------------------------------------------------------------


def real_corpus(cfg: Config, res: Results) -> Path:
    if cfg.corpus is not None:
        return cfg.corpus
    if SHARED_CORPUS.is_dir():
        return SHARED_CORPUS
    res.notes.append(
        f"{SHARED_CORPUS} is absent (only beside the project's own checkout): the real-corpus "
        f"figures use the in-repo sample {SAMPLE_CORPUS.relative_to(REPO)} instead"
    )
    return SAMPLE_CORPUS


def copy_native(src: Path, dst: Path) -> Path:
    """A native copy on local disk: the baseline for reading (what a checkout gives)."""
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    return dst


def slice_corpus(src: Path, dst: Path, max_bytes: int) -> Path:
    """The first files of ``src`` (sorted) up to ``max_bytes``: a small real-model workload."""
    dst.mkdir(parents=True, exist_ok=True)
    total = 0
    for f in sorted(p for p in src.rglob("*") if p.is_file() and p.suffix in (".md", ".mdx")):
        size = f.stat().st_size
        if total + size > max_bytes and total:
            continue
        target = dst / f.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, target)
        total += size
    return dst


SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "xi", "ze", "po", "qua", "sel", "dor"]
SECTIONS_PER_FILE = 10
FILES_PER_DIR = 100


def synthetic_corpus(root: Path, chunks: int, seed: int = 1) -> Path:
    """Markdown files of ~``chunks`` chunks (one per ``##`` section with the hash embedder).

    Words follow a Zipf law over a fixed pseudo-word vocabulary, so grep, BM25 and the
    stand-in embedder see realistic term frequencies; the text is deterministic per seed.
    """
    import numpy as np

    vocab = np.array(
        sorted({a + b + c for a in SYLLABLES for b in SYLLABLES for c in SYLLABLES}), dtype=object
    )
    rng = np.random.default_rng(seed)
    rng.shuffle(vocab)
    weights = 1.0 / np.arange(1, len(vocab) + 1)
    weights /= weights.sum()
    files = max(1, round(chunks / SECTIONS_PER_FILE))
    words = rng.choice(len(vocab), size=(files, SECTIONS_PER_FILE, 3 + 2 * 55), p=weights)
    for i in range(files):
        d = root / f"d{i // FILES_PER_DIR:04d}"
        d.mkdir(parents=True, exist_ok=True)
        parts = [f"---\ntitle: Synthetic page {i}\n---\n"]
        for s in range(SECTIONS_PER_FILE):
            w = vocab[words[i, s]]
            parts.append(f"\n## {' '.join(w[:3])}\n\n{' '.join(w[3:58])}.\n\n{' '.join(w[58:])}.\n")
        (d / f"page{i:05d}.md").write_text("".join(parts))
    return root


def questions(root: Path, n: int, seed: int) -> list[str]:
    """``n`` distinct questions made from the corpus's headings: fresh for every query."""
    heads: list[str] = []
    files = sorted(p for p in root.rglob("*") if p.suffix in (".md", ".mdx"))[:600]
    for f in files:
        for m in re.finditer(r"^#{1,3}[ \t]+(.+)$", f.read_text(errors="replace"), re.M):
            h = re.sub(r"[^\w .,'-]", " ", m.group(1)).strip()
            if 3 <= len(h) <= 60:
                heads.append(" ".join(h.split()))
    heads = sorted(set(heads)) or ["documentation"]
    rng = random.Random(seed)
    rng.shuffle(heads)
    templates = ["how do I {}", "{} example", "what is {}", "configure {}", "{} not working"]
    out: list[str] = []
    seen: set[str] = set()
    i = 0
    while len(out) < n:
        q = templates[(i // len(heads)) % len(templates)].format(heads[i % len(heads)])
        if i >= len(heads) * len(templates):
            q = f"{q} {i}"
        q = q.lstrip(".@ ")  # a leading '.' or '@' is not a query in the mount
        if q.lower() not in seen:
            seen.add(q.lower())
            out.append(q[:120])
        i += 1
    return out
