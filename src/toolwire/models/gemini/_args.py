"""Gemini wire helpers that work on text: Vertex streamed function-call arguments and the JSON-array stream.

Both are incremental and linear in the size of their input: nothing is re-parsed when more data arrives.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from toolwire.models._builder import compact_json

PathToken: TypeAlias = str | int

# ``$.a.b[0].c``, ``$['odd key']``, ``$["odd key"]``: the shapes Vertex uses in ``partialArgs[].jsonPath``.
_PATH_TOKEN = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]|\[\"((?:[^\"\\]|\\.)*)\"\]")


def parse_json_path(path: str) -> list[PathToken] | None:
    """``$.recipe.items[3].name`` -> ``["recipe", "items", 3, "name"]``; ``None`` for unknown shapes."""
    if not path.startswith("$"):
        return None
    tokens: list[PathToken] = []
    pos = 1
    while pos < len(path):
        match = _PATH_TOKEN.match(path, pos)
        if match is None:
            return None
        name, index, single, double = match.groups()
        if index is not None:
            tokens.append(int(index))
        else:
            tokens.append(name if name is not None else single if single is not None else double)
        pos = match.end()
    return tokens or None


class _Str:
    """A string value still receiving fragments; joined once when the arguments are complete."""

    __slots__ = ("parts",)

    def __init__(self, first: str) -> None:
        self.parts = [first]


def _materialise(node: Any) -> Any:
    if isinstance(node, _Str):
        return "".join(node.parts)
    if isinstance(node, dict):
        return {k: _materialise(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_materialise(v) for v in node]
    return node


@dataclass(slots=True)
class _Frame:
    """One container that is open in the JSON text being written."""

    token: PathToken | None
    is_list: bool
    keys: set[str] = field(default_factory=set)
    last_index: int = -1

    @property
    def empty(self) -> bool:
        return not self.keys and self.last_index < 0


class StreamedArgs:
    """Assembles Vertex ``partialArgs`` fragments into the arguments object.

    Two things are kept in step, both in time linear in the total fragment size:

    * the object itself (a tree whose strings are fragment lists, joined once at the end), which is the
      authority for ``ToolInputEnd.args``;
    * a JSON text that only ever grows by appending, so the ``tool-input-delta`` fragments concatenate to a
      valid JSON prefix as UIs expect. Vertex sends paths in document order; if it ever went back into a
      container it already left (or skipped an array index), the text could no longer be extended by
      appending: the text is then abandoned (``text_intact`` becomes False) and the final JSON is written
      from the object instead.
    """

    __slots__ = ("_frames", "_open_string", "_root", "_text", "text_intact")

    def __init__(self) -> None:
        self._root: dict[str, Any] = {}
        self._frames: list[_Frame] = []
        self._open_string: tuple[list[PathToken], _Str] | None = None
        self._text: list[str] = []
        self.text_intact = True

    def add(self, path: list[PathToken], value: Any, *, is_string: bool, will_continue: bool) -> str:
        """Apply one fragment; returns the JSON text it appends (may be empty)."""
        out: list[str] = []
        if self._open_string is not None:
            open_path, buffer = self._open_string
            if is_string and open_path == path:
                buffer.parts.append(value)
                self._emit(out, json.dumps(value, ensure_ascii=False)[1:-1])
                if not will_continue:
                    self._open_string = None
                    self._emit(out, '"')
                return "".join(out)
            self._open_string = None
            self._emit(out, '"')
        leaf: Any = _Str(value) if is_string else value
        self._set(path, leaf)
        if self.text_intact:
            self._write_path(out, path)
        if is_string:
            self._emit(out, '"' + json.dumps(value, ensure_ascii=False)[1:-1])
            if will_continue:
                self._open_string = (path, leaf)
            else:
                self._emit(out, '"')
        else:
            self._emit(out, compact_json(value))
        return "".join(out)

    def close(self) -> str:
        """Close whatever is open; returns the final JSON text fragment."""
        out: list[str] = []
        if self._open_string is not None:
            self._open_string = None
            self._emit(out, '"')
        if not self._frames and not self._text:
            self._emit(out, "{}")
        while self._frames:
            self._emit(out, "]" if self._frames.pop().is_list else "}")
        return "".join(out)

    def result(self) -> tuple[dict[str, Any], str]:
        """The assembled arguments and their JSON text (call after :meth:`close`)."""
        args: dict[str, Any] = _materialise(self._root)
        return args, "".join(self._text) if self.text_intact else compact_json(args)

    # -- the object -------------------------------------------------------------------------------------

    def _set(self, path: list[PathToken], leaf: Any) -> None:
        node: Any = self._root
        for depth, token in enumerate(path):
            last = depth == len(path) - 1
            child: Any = leaf if last else ([] if isinstance(path[depth + 1], int) else {})
            if isinstance(node, dict) and isinstance(token, str):
                if last or not isinstance(node.get(token), type(child)):
                    node[token] = child
                node = node[token]
            elif isinstance(node, list) and isinstance(token, int):
                if len(node) <= token:
                    node.extend([None] * (token + 1 - len(node)))
                if last or not isinstance(node[token], type(child)):
                    node[token] = child
                node = node[token]
            else:  # an array index at the root: arguments are always an object, so the fragment is dropped
                self.text_intact = False
                return

    # -- the text ---------------------------------------------------------------------------------------

    def _emit(self, out: list[str], text: str) -> None:
        if self.text_intact and text:
            out.append(text)
            self._text.append(text)

    def _write_path(self, out: list[str], path: list[PathToken]) -> None:
        """Write separators, keys and container openings up to (not including) the value at ``path``."""
        if not self._frames:
            if self._text:  # the root was already closed
                self.text_intact = False
                return
            self._frames.append(_Frame(token=None, is_list=False))
            self._emit(out, "{")
        open_path = [f.token for f in self._frames[1:]]
        common = 0
        while common < min(len(open_path), len(path) - 1) and open_path[common] == path[common]:
            common += 1
        while len(self._frames) - 1 > common:
            self._emit(out, "]" if self._frames.pop().is_list else "}")
        for depth in range(common, len(path)):
            frame, token = self._frames[-1], path[depth]
            if frame.is_list:
                if not isinstance(token, int) or token != frame.last_index + 1:
                    self.text_intact = False
                    return
                separator = "" if frame.empty else ","
                frame.last_index = token
            else:
                if not isinstance(token, str) or token in frame.keys:
                    self.text_intact = False
                    return
                separator = ("" if frame.empty else ",") + json.dumps(token, ensure_ascii=False) + ":"
                frame.keys.add(token)
            self._emit(out, separator)
            if depth < len(path) - 1:
                is_list = isinstance(path[depth + 1], int)
                self._frames.append(_Frame(token=token, is_list=is_list))
                self._emit(out, "[" if is_list else "{")


# ---------------------------------------------------------------------------------------------------------
# ``streamGenerateContent`` without ``alt=sse``: one JSON array sent element by element,
# ``[{...}\n,\r\n{...}\n]``

_OUTSIDE = re.compile(r'[{}"]')
_IN_STRING = re.compile(r'["\\]')


class JsonArrayReader:
    """Splits a streamed JSON array into its elements as soon as each one is complete.

    A small scanner tracks string and brace state across feeds, so each character is looked at once.
    """

    __slots__ = ("_buffer", "_depth", "_escape", "_in_string", "_start")

    def __init__(self) -> None:
        self._buffer: list[str] = []
        self._depth = 0
        self._in_string = False
        self._escape = False
        self._start = -1

    def feed(self, text: str) -> Iterator[Any]:
        """Yield every element completed by ``text``."""
        pos = 0
        if self._escape and text:  # an escape split across feeds: its character is consumed here
            self._escape = False
            pos = 1
        while pos < len(text):
            if self._in_string:
                match = _IN_STRING.search(text, pos)
                if match is None:
                    break
                if match.group() == "\\":
                    if match.end() >= len(text):
                        self._escape = True
                        break
                    pos = match.end() + 1
                    continue
                self._in_string = False
                pos = match.end()
                continue
            match = _OUTSIDE.search(text, pos)
            if match is None:
                break
            char, pos = match.group(), match.end()
            if char == '"':
                self._in_string = self._depth > 0
                continue
            if char == "{":
                if self._depth == 0:
                    self._start = match.start()
                self._depth += 1
                continue
            if self._depth == 0:  # a stray brace between elements: not ours to judge, skip it
                continue
            self._depth -= 1
            if self._depth == 0:
                element = "".join(self._buffer) + text[max(self._start, 0) : pos]
                self._buffer, self._start = [], -1
                yield json.loads(element)
        if self._depth > 0:
            self._buffer.append(text[max(self._start, 0) :])
            self._start = 0

    @property
    def incomplete(self) -> bool:
        """True when the body ended inside an element."""
        return self._depth > 0
