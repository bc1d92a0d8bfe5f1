#!/bin/sh
set -eu

# Send the part again, three times at most, then give up.
retry_upload() {
    for i in 1 2 3; do send_part "$1" && return 0; sleep "$i"; done
    return 1
}

abort() {
    rm -rf "$QUEUE_DIR"  # drop every queued part now
}

retry_upload "$@"
