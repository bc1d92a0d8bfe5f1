#!/usr/bin/env bash
# The main job, end to end on the embedded store: install, ingest a real corpus, show status
# and a search, then mount it and use a search directory. Usage: scripts/demo.sh [DOCS_DIR]
# Uses its own collection ("semfs-demo") so it never touches your other collections.
set -euo pipefail
cd "$(dirname "$0")/.."
docs="${1:-tests/corpus/mintlify-sample}"
scripts/setup.sh
semfs=.venv/bin/semfs
export SEMFS_COLLECTION=semfs-demo

echo "== semfs ingest $docs"
"$semfs" ingest "$docs" --replace   # the demo's own collection: another folder replaces it
echo; echo "== semfs status"
"$semfs" status
echo; echo "== semfs collections list   (semfs collections rm semfs-demo removes this one)"
"$semfs" collections list
echo; echo "== semfs search 'how do I use my own domain for the docs' -k 3"
"$semfs" search "how do I use my own domain for the docs" -k 3

mnt=$(mktemp -d "${TMPDIR:-/tmp}/semfs-demo.XXXXXX")
cleanup() { "$semfs" umount "$mnt" 2>/dev/null || true; rmdir "$mnt" 2>/dev/null || true; }
trap cleanup EXIT
echo; echo "== semfs mount $mnt"
"$semfs" mount "$mnt"
echo "== ls $mnt"; ls "$mnt"
q="how do I use my own domain for the docs"
echo; echo "== ls \"$mnt/.search/$q/\""; ls "$mnt/.search/$q/"
echo; echo "== head -n 20 \"$mnt/.search/$q/00-results.md\""; head -n 20 "$mnt/.search/$q/00-results.md"
echo; echo "== grep -rl 'custom domain' $mnt | head -n 5"; grep -rl 'custom domain' "$mnt" | head -n 5 || true
echo; echo "== semfs umount $mnt"
