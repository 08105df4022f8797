"""Eager PyTorch: what a PyTorch user writes. Runs wherever torch does."""
from harness.registry import Framework


class Eager(Framework):
    name = "eager"
