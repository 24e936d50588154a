"""Argument fragments read from an event's bytes while nothing else happens in the stream (a large call).

A parser owns one :class:`DeltaShortcut` and offers it every event's data first (:meth:`read`, the
parser's ``feed_data``). The parser says when the event it just read the general way was a bare fragment of
one call (:meth:`learn`): from then on, events with the same bytes around another fragment are read here
(see :class:`ChunkTemplate`): the fragment added to the call's arguments, one ToolInputDelta. Every other
event goes the general way and ends the shortcut (:meth:`general`): it may change what the next event means
(a finish, a new call on the same index, text in between).
"""

from __future__ import annotations

from toolwire.models._builder import ToolArgsAccumulator
from toolwire.models._chunk_template import ChunkTemplate
from toolwire.models.base import ModelStreamPart, ToolInputDelta


class DeltaShortcut:
    """``key``: the bytes before a fragment's value (``b'"partial_json":"'``); ``counter``: a number key
    whose value changes per event (``b'"sequence_number":'``)."""

    __slots__ = ("_call_id", "_counter", "_fed", "_key", "_missed", "_template", "_to")

    def __init__(self, key: bytes, counter: bytes | None = None) -> None:
        self._key = key
        self._counter = counter
        self._template: ChunkTemplate | None = None
        self._to = ToolArgsAccumulator()
        self._call_id = ""
        self._missed: tuple[str, bytes] | None = None
        """The event :meth:`read` handed back: the parser decodes and feeds it next."""
        self._fed: tuple[str, bytes] | None = None
        """The event being fed the general way, to learn from."""

    def read(self, name: str, data: bytes) -> list[ModelStreamPart] | None:
        """An event's parts when it is the learned one around another fragment; None: decode and feed it."""
        text = self._template.fragment(name, data) if self._template is not None else None
        if text is None:
            self._missed = (name, data)
            return None
        self._to.add(text)
        return [ToolInputDelta(tool_call_id=self._call_id, delta=text)]

    def general(self) -> None:
        """An event is fed the general way (call first in ``feed``): the shortcut ends until :meth:`learn`."""
        self._template = None
        self._fed, self._missed = self._missed, None

    def learn(self, to: ToolArgsAccumulator, call_id: str, fragment: str) -> None:
        """The event being fed was only ``fragment`` of the call ``call_id`` (added to ``to``): events with
        the same bytes around another fragment are read here until the next :meth:`general`."""
        if self._fed is None:
            return
        (name, data), self._fed = self._fed, None
        self._template = ChunkTemplate.learn(name, data, fragment, key=self._key, counter=self._counter)
        self._to, self._call_id = to, call_id


__all__ = ["DeltaShortcut"]
