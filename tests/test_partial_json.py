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


def _values_after_each(pieces: list[str]) -> list[Any]:
    parser = PartialJSONParser()
    values = []
    for piece in pieces:
        parser.feed(piece)
        values.append(parser.value())
    return values


@settings(max_examples=200, deadline=None)
@given(
    value=json_values,
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=8),
    ascii_only=st.booleans(),
    indent=st.sampled_from([None, 1]),
)
def test_partial_values_do_not_depend_on_how_the_text_is_cut(
    value: Any, cuts: list[int], ascii_only: bool, indent: int | None
) -> None:
    # Big fragments go through the C scanner, single characters token by token: both read alike.
    text = json.dumps({"v": value, "w": [value]}, ensure_ascii=ascii_only, indent=indent)
    points = sorted({c % (len(text) + 1) for c in cuts} | {len(text)})
    pieces = [text[start:end] for start, end in itertools.pairwise([0, *points])]
    values = _values_after_each(pieces)
    assert values == [parse_partial(text[:end]) for end in points]
    by_character = _values_after_each(list(text))
    assert values == [by_character[end - 1] if end else None for end in points]


def test_a_value_read_earlier_does_not_change_when_more_is_fed() -> None:
    parser = PartialJSONParser()
    parser.feed('{"rows": [{"id": 1, "tags": ["a"]}, {"id": 2, "name": "ite')
    first = parser.value()
    snapshot = json.loads(json.dumps(first))
    parser.feed('m", "tags": ["b"')
    second = parser.value()
    parser.feed(', "c"]}], "more": {"x": "y"}}')
    assert first == snapshot == {"rows": [{"id": 1, "tags": ["a"]}, {"id": 2, "name": "ite"}]}
    assert second == {"rows": [{"id": 1, "tags": ["a"]}, {"id": 2, "name": "item", "tags": ["b"]}]}
    assert parser.final() == {
        "rows": [{"id": 1, "tags": ["a"]}, {"id": 2, "name": "item", "tags": ["b", "c"]}],
        "more": {"x": "y"},
    }
    # Closed containers are shared, not copied again on every read.
    assert first["rows"][0] is second["rows"][0]


@pytest.mark.parametrize("size", [1, 3, 7, 64, 10_000])
def test_escapes_and_surrogates_in_any_fragment_size(size: int) -> None:
    text = '{"k\\u00e9y": "a\\"b\\\\c\\n\\ud83d\\ude00 \\ud800 x\\ty", "raw": "\ud83d\ude00"}'
    parser = PartialJSONParser()
    for start in range(0, len(text), size):
        parser.feed(text[start : start + size])
    assert parser.final() == {"kéy": 'a"b\\c\n😀 \ufffd x\ty', "raw": "😀"}


def test_unknown_escapes_are_kept_leniently() -> None:
    for size in (1, 4, 100):
        parser = PartialJSONParser()
        text = '{"a": "x\\qy", "b": "' + "long \\q " * 10 + '"}'
        for start in range(0, len(text), size):
            parser.feed(text[start : start + size])
        assert parser.final() == {"a": "xqy", "b": "long q " * 10}


def test_numbers_and_literals_cut_by_a_fragment_are_left_out_until_they_end() -> None:
    parser = PartialJSONParser()
    parser.feed('{"a": [1.5e')
    assert parser.value() == {"a": []}
    parser.feed("3, tr")
    assert parser.value() == {"a": [1500.0]}
    parser.feed("ue]}")
    assert parser.final() == {"a": [1500.0, True]}
    assert parse_partial("[1, 2") == [1]
    assert parse_partial("12") is None


@pytest.mark.parametrize("bad", ["[]2", "{9", '{"a": 1 "b"', "[NaN]", "[-Infinity]", '{"a":}'])
def test_invalid_text_raises_as_soon_as_it_cannot_become_valid(bad: str) -> None:
    with pytest.raises(PartialJSONError):
        PartialJSONParser().feed(bad)


def test_deep_nesting_is_read_without_recursion() -> None:
    parser = PartialJSONParser()
    parser.feed("[" * 5000)
    parser.feed("]" * 5000)
    assert parser.complete
