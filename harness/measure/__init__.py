"""The measurement: timing, the roof, correctness and the launcher's contract, provenance."""
