"""The floor row of section 1 (benchmarks/floor.py), under the name the loop worker imports."""

from floor import NAME, STORES, run

__all__ = ["NAME", "STORES", "run"]
