"""kernel-harness: run equivalent kernel implementations, check them, time them against
the measured bandwidth roof, and log every case."""
__version__ = "0.1.0"
