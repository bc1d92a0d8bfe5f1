"""semfs ingest: documents -> chunks -> Qdrant (embedded Qdrant Edge or a Qdrant server).

Data flows one way: this package writes the store; ``fusefs`` reads it through
:mod:`ingest.store`. Nothing here imports ``fusefs`` or FUSE bindings.
"""

__version__ = "0.1.0"
