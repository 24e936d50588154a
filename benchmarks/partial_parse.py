"""Section 6: the incremental JSON parser that keeps partial values available while they stream.

`toolwire._partial_json.PartialJSONParser` is what `agent/output.py` (structured output) feeds with every
argument or text delta, reading the partial value after each one. Two payloads of 64 KB to 1 MB, cut into
64-character fragments like section 2: one long string (`{"content": "lorem ipsum ..."}`) and a list
of small records (`{"rows": [{"id": 0, "name": "item-0", "tags": [...], ...}, ...]}`). Two ways to read:

* feed every fragment, read the value once at the end (`final()`);
* feed every fragment and read the partial value after each one (`value()`, what structured output
  does).

Reference rows: `pydantic_core.from_json` (already a toolwire dependency). It has no incremental mode,
so the "end" row parses the joined text once, and the "every" row re-parses the growing text with
`allow_partial="trailing-strings"` after each fragment. `json.loads` once is the stdlib floor.
Reported: MB of JSON per second (median of `--repeat` runs) and the time growth from 64 KB to 1 MB
(16x the bytes: ~16x is linear).

    .venv/bin/python benchmarks/partial_parse.py [--quick] [--repeat 5] [--baseline OLD_partial_json.py]
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import pydantic_core

from toolwire._partial_json import PartialJSONParser

FRAGMENT = 64
SIZES = [64 * 1024, 256 * 1024, 1024 * 1024]
# A reader that re-parses the whole text after every fragment is quadratic; beyond this it takes minutes.
REPARSE_LIMIT = 256 * 1024


def string_payload(size: int) -> str:
    return json.dumps({"content": ("lorem ipsum dolor sit amet " * (size // 27 + 1))[:size]})


def rows_payload(size: int) -> str:
    rows: list[dict[str, Any]] = []
    total = 0
    while total < size:
        i = len(rows)
        row = {"id": i, "name": f"item-{i}", "tags": ["alpha", "beta"], "price": i * 1.25, "ok": i % 2 == 0}
        rows.append(row)
        total += len(json.dumps(row)) + 2
    return json.dumps({"rows": rows})


PAYLOADS: dict[str, Callable[[int], str]] = {"string": string_payload, "rows": rows_payload}


def fragments(text: str) -> list[str]:
    return [text[i : i + FRAGMENT] for i in range(0, len(text), FRAGMENT)]


Reader = Callable[[list[str]], Any]


def readers_of(parser_class: type[Any]) -> tuple[Reader, Reader]:
    """Feed every fragment to a parser of ``parser_class``; read once at the end, or after each."""

    def end(pieces: list[str]) -> Any:
        parser = parser_class()
        for piece in pieces:
            parser.feed(piece)
        return parser.final()

    def every(pieces: list[str]) -> Any:
        parser, value = parser_class(), None
        for piece in pieces:
            parser.feed(piece)
            value = parser.value()
        return value

    return end, every


toolwire_end, toolwire_every = readers_of(PartialJSONParser)


def pydantic_core_end(pieces: list[str]) -> Any:
    return pydantic_core.from_json("".join(pieces))


def pydantic_core_every(pieces: list[str]) -> Any:
    text = ""
    value = None
    for piece in pieces:
        text += piece
        value = pydantic_core.from_json(text, allow_partial="trailing-strings")
    return value


def json_end(pieces: list[str]) -> Any:
    return json.loads("".join(pieces))


READERS: list[tuple[str, str, Reader]] = [
    ("value at the end", "toolwire", toolwire_end),
    ("value at the end", "pydantic_core (whole text once, reference)", pydantic_core_end),
    ("value at the end", "json.loads (whole text once, reference)", json_end),
    ("value after every fragment", "toolwire", toolwire_every),
    ("value after every fragment", "pydantic_core (re-parse, reference)", pydantic_core_every),
]


def measure(reader: Reader, text: str, repeats: int) -> float:
    """Median MB/s over ``repeats`` runs, after a checked warm-up run."""
    pieces = fragments(text)
    if reader(pieces) != json.loads(text):
        raise AssertionError(f"{reader.__name__} returned a wrong value")
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        reader(pieces)
        samples.append(time.perf_counter() - start)
    return len(text) / statistics.median(samples) / 1e6


def baseline_readers(path: str) -> list[tuple[str, str, Reader]]:
    """The toolwire readers with the parser class of another version of _partial_json.py (before/after)."""
    spec = importlib.util.spec_from_file_location("partial_json_baseline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    end, every = readers_of(module.PartialJSONParser)
    every.quadratic = True  # type: ignore[attr-defined]  # the version this replaced copied every value whole
    return [
        ("value at the end", f"toolwire, {path}", end),
        ("value after every fragment", f"toolwire, {path}", every),
    ]


def run(quick: bool = False, repeats: int | None = None, baseline: str | None = None) -> list[dict[str, Any]]:
    repeats = repeats or (3 if quick else 5)
    sizes = [SIZES[0], SIZES[-1]] if quick else SIZES
    readers = READERS + (baseline_readers(baseline) if baseline else [])
    rows = []
    for payload, make in PAYLOADS.items():
        for mode, name, reader in sorted(readers, key=lambda r: r[0] != "value at the end"):
            row: dict[str, Any] = {"payload": payload, "mode": mode, "reader": name}
            for size in sizes:
                quadratic = reader is pydantic_core_every or getattr(reader, "quadratic", False)
                row[f"{size // 1024}K"] = (
                    None if quadratic and size > REPARSE_LIMIT else measure(reader, make(size), repeats)
                )
            rows.append(row)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    sizes = [k for k in rows[0] if k.endswith("K")]
    first, last = sizes[0], sizes[-1]
    scale = int(last[:-1]) // int(first[:-1])
    lines = [
        "| payload | read | parser | "
        + " | ".join(f"MB/s @ {s}" for s in sizes)
        + f" | time growth ({scale}x bytes) |",
        "|---|---|---|" + "---:|" * (len(sizes) + 1),
    ]
    for r in rows:
        cells = [f"{r[s]:.1f}" if r[s] is not None else "— (quadratic)" for s in sizes]
        growth = f"{r[first] / r[last] * scale:.1f}x" if r[first] and r[last] else ""
        lines.append(
            f"| {r['payload']} | {r['mode']} | {r['reader']} | " + " | ".join(cells) + f" | {growth} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    from _cli import bench_main

    bench_main(__doc__, run, table, baseline="another _partial_json.py to measure alongside (before/after)")
