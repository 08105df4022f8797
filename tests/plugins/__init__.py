"""Test-only impls loaded through HARNESS_PLUGINS (they must be importable by the worker)."""
