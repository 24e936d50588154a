from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolwire._partial_json import PartialJSONError, PartialJSONParser, parse_partial

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(
    value=json_values,
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=8),
    ascii_only=st.booleans(),
)
def test_any_fragmentation_gives_the_same_final_value(value: Any, cuts: list[int], ascii_only: bool) -> None:
    text = json.dumps({"v": value}, ensure_ascii=ascii_only)
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    parser = PartialJSONParser()
    for start, end in itertools.pairwise(points):
        parser.feed(text[start:end])
        parser.value()  # never raises mid-way
    assert parser.final() == {"v": value}


def test_partial_values_close_what_is_open() -> None:
    assert parse_partial('{"name": "Ad') == {"name": "Ad"}
    assert parse_partial('{"a": [1, 2, {"b": "x') == {"a": [1, 2, {"b": "x"}]}
    assert parse_partial('{"a": 12') == {}  # an unfinished number is left out
    assert parse_partial('{"unfinished_ke') == {}
    assert parse_partial('"just a str') == "just a str"
    assert parse_partial("") is None


def test_escapes_split_across_fragments() -> None:
    parser = PartialJSONParser()
    for piece in ['{"t": "a\\', "nb \\u00", "e9 \\ud83d", '\\ude00"}']:
        parser.feed(piece)
    assert parser.final() == {"t": "a\nb é 😀"}


@pytest.mark.parametrize("bad", ['{"a" 1}', "[1}", "}", '{"a": 1}}', "[tru]"])
def test_invalid_text_raises_a_typed_error(bad: str) -> None:
    parser = PartialJSONParser()
    with pytest.raises(PartialJSONError):
        parser.feed(bad)
        parser.final()


def test_incomplete_text_is_not_final() -> None:
    parser = PartialJSONParser()
    parser.feed('{"a": [1')
    assert not parser.complete
    with pytest.raises(PartialJSONError):
        parser.final()
