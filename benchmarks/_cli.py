"""The command line shared by the benchmark modules that run alone: `--quick`, `--repeat N`."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any


def bench_main(
    doc: str | None, run: Callable[..., Any], table: Callable[[Any], str], *, baseline: str = ""
) -> None:
    """Parse the options, ``run(quick=, repeats=[, baseline=])`` and print ``table`` of the result."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    parser.add_argument("--repeat", type=int, default=None, help="timed runs per measurement")
    if baseline:
        parser.add_argument("--baseline", help=baseline)
    options = vars(parser.parse_args())
    options["repeats"] = options.pop("repeat")
    print(table(run(**options)))
