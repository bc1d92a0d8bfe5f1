"""The benchmark's sections, one module each, and the harness they share (see ../bench.py)."""
