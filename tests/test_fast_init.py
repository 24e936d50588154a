"""The slot-speed ``__init__`` of events and stream parts keeps what the dataclass one guaranteed."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from toolwire._fast_init import fast_frozen_init, fast_replace
from toolwire.events import InteractionEnd, ToolCallComplete, event_from_dict, event_to_dict
from toolwire.messages import Usage
from toolwire.models.base import TextDelta


@dataclasses.dataclass(frozen=True, slots=True)
class _Pair:
    left: int
    right: list[int] = dataclasses.field(default_factory=list)
    label: str = "x"


def test_the_replaced_init_keeps_signature_defaults_and_factories() -> None:
    made: type[Any] = dataclasses.make_dataclass("Made", [("left", int)], frozen=True, slots=True)
    assert fast_frozen_init(made)(1).left == 1
    fast_frozen_init(_Pair)
    a, b = _Pair(1), _Pair(1, label="y")
    assert (a.left, a.right, a.label, b.label) == (1, [], "x", "y")
    assert a.right is not _Pair(1).right  # a fresh default per instance, as the factory promises
    assert _Pair(2, [3]) == _Pair(left=2, right=[3])
    with pytest.raises(TypeError):
        _Pair()  # type: ignore[call-arg]
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.left = 3  # type: ignore[misc]


def test_events_and_stream_parts_stay_frozen_equal_and_round_trip() -> None:
    event = ToolCallComplete(
        session_id="s", seq=4, tool_call_id="c", tool_name="t", args={"a": 1}, output="ok", status="ok"
    )
    assert event.timestamp > 0 and event.type == "tool-call-complete" and event.is_error is False
    assert event_from_dict(event_to_dict(event)) == event
    assert isinstance(InteractionEnd(session_id="s").usage, Usage)
    with pytest.raises(TypeError):
        ToolCallComplete("s", tool_call_id="c")  # type: ignore[call-arg]
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.seq = 5  # type: ignore[misc]
    part = TextDelta(id="0", delta="hi")
    assert part == TextDelta(id="0", delta="hi") and hash(part) == hash(TextDelta(id="0", delta="hi"))


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _Row:
    key: str
    status: str = "pending"
    tags: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, slots=True)
class _Checked:
    value: int

    def __post_init__(self) -> None:
        if self.value < 0:
            raise ValueError("negative")


def test_fast_replace_copies_like_dataclasses_replace() -> None:
    row = _Row(key="a", tags=["t"])
    changed = fast_replace(row, status="ok")
    assert changed == dataclasses.replace(row, status="ok") and changed is not row
    assert (row.status, changed.status, changed.tags is row.tags) == ("pending", "ok", True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        changed.status = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        fast_replace(row, missing=1)  # an unknown field is refused, as replace refuses it
    with pytest.raises(ValueError):
        fast_replace(_Checked(1), value=-1)  # a __post_init__ still runs (the class goes through replace)


def test_a_post_init_still_runs_last() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Normalised:
        items: tuple[int, ...] | list[int]

        def __post_init__(self) -> None:
            object.__setattr__(self, "items", tuple(self.items))

    original_init = Normalised.__init__
    fast_frozen_init(Normalised)
    assert Normalised.__init__ is not original_init  # replaced, and still normalises
    assert Normalised([1, 2]).items == (1, 2)
    fast_frozen_init(_Checked)
    with pytest.raises(ValueError):
        _Checked(-1)
