"""Incremental JSON parsing: feed fragments, read the value parsed so far at any time.

Each fragment is processed once (total work O(N) for N bytes, whatever the number of fragments); string
contents are copied in runs found with ``str.find``, not character by character. ``value()`` returns the
partial value with open strings, arrays and objects closed as far as they got; an incomplete number or
literal, and a key still being read, are left out.
"""

from __future__ import annotations

import json
from typing import Any

_WS = " \t\r\n"
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_MISSING = object()


class PartialJSONError(ValueError):
    """The text can no longer become valid JSON."""


class PartialJSONParser:
    __slots__ = (
        "_colon",
        "_done",
        "_esc",
        "_key",
        "_literal",
        "_need_sep",
        "_root",
        "_stack",
        "_str",
        "_str_is_key",
        "_unicode",
    )

    def __init__(self) -> None:
        self._root: Any = _MISSING
        self._stack: list[Any] = []  # open containers, innermost last
        self._key: str | None = None  # pending key of the innermost object
        self._str: list[str] | None = None  # open string chunks
        self._str_is_key = False
        self._esc = False
        self._unicode: str | None = None  # collected hex digits of a \u escape
        self._literal: list[str] | None = None  # number / true / false / null being read
        self._done = False
        self._colon = False  # a key was read; ':' must come next
        self._need_sep = False  # a value was read inside a container; ',' or a closer must come next

    # -- feeding ------------------------------------------------------------------------------------

    def feed(self, text: str) -> None:
        i, n = 0, len(text)
        while i < n:
            if self._str is not None:
                i = self._feed_string(text, i)
                continue
            ch = text[i]
            if self._literal is not None:
                if ch in ",]}" or ch in _WS:
                    self._finish_literal()
                    continue  # re-read the delimiter
                self._literal.append(ch)
                i += 1
                continue
            i += 1
            if ch in _WS:
                continue
            if self._colon and ch != ":":
                raise PartialJSONError(f"expected ':' after an object key, got {ch!r}")
            if self._need_sep and ch not in ",]}":
                raise PartialJSONError(f"expected ',' or a closing bracket, got {ch!r}")
            self._structural(ch)

    def _structural(self, ch: str) -> None:
        if ch == '"':
            self._str = []
            self._str_is_key = self._expecting_key()
        elif ch in "{[":
            self._add_value({} if ch == "{" else [])
        elif ch in "}]":
            if not self._stack:
                raise PartialJSONError(f"unexpected {ch!r}")
            closed = self._stack.pop()
            if (ch == "}") != isinstance(closed, dict):
                raise PartialJSONError(f"mismatched {ch!r}")
            self._key = None
            self._done = not self._stack
            self._need_sep = bool(self._stack)
        elif ch == ",":
            if not self._need_sep:
                raise PartialJSONError("unexpected ','")
            self._key = None
            self._need_sep = False
        elif ch == ":":
            if not self._colon:
                raise PartialJSONError("unexpected ':'")
            self._colon = False
        elif ch in "-0123456789tfn":
            self._literal = [ch]
        else:
            raise PartialJSONError(f"unexpected character {ch!r}")

    def _feed_string(self, text: str, i: int) -> int:
        chunks = self._str
        assert chunks is not None
        n = len(text)
        while i < n:
            if self._unicode is not None:
                self._unicode += text[i]
                i += 1
                if len(self._unicode) == 4:
                    chunks.append(chr(int(self._unicode, 16)))
                    self._unicode = None
                continue
            if self._esc:
                ch = text[i]
                i += 1
                self._esc = False
                if ch == "u":
                    self._unicode = ""
                else:
                    chunks.append(_ESCAPES.get(ch, ch))
                continue
            quote = text.find('"', i)
            slash = text.find("\\", i)
            if slash != -1 and (quote == -1 or slash < quote):
                chunks.append(text[i:slash])
                self._esc = True
                i = slash + 1
                continue
            if quote == -1:
                chunks.append(text[i:])
                return n
            chunks.append(text[i:quote])
            self._close_string()
            return quote + 1
        return n

    def _close_string(self) -> None:
        value = _join_surrogates("".join(self._str or ()))
        self._str = None
        if self._str_is_key:
            self._key = value
            self._colon = True
        else:
            self._add_value(value)

    def _finish_literal(self) -> None:
        token = "".join(self._literal or ())
        self._literal = None
        try:
            value = json.loads(token)
        except ValueError as exc:
            raise PartialJSONError(f"invalid literal {token!r}") from exc
        self._add_value(value)

    def _expecting_key(self) -> bool:
        return bool(self._stack) and isinstance(self._stack[-1], dict) and self._key is None

    def _add_value(self, value: Any) -> None:
        if not self._stack:
            if self._root is not _MISSING:
                raise PartialJSONError("more than one top-level value")
            self._root = value
        else:
            parent = self._stack[-1]
            if isinstance(parent, dict):
                if self._key is None:
                    raise PartialJSONError("object value without a key")
                parent[self._key] = value
                self._key = None
            else:
                parent.append(value)
        if self._done:
            raise PartialJSONError("more than one top-level value")
        if isinstance(value, dict | list):
            self._stack.append(value)
        elif not self._stack:
            self._done = True
        else:
            self._need_sep = True

    # -- reading --------------------------------------------------------------------------------------

    @property
    def complete(self) -> bool:
        """True once a whole top-level value has been read."""
        return self._done and self._str is None and self._literal is None

    def value(self) -> Any:
        """A copy of the value parsed so far (``None`` before anything)."""
        if self._root is _MISSING:
            if self._str is not None and not self._str_is_key:
                return "".join(self._str)
            return None
        root = _copy(self._root)
        if self._str is not None and not self._str_is_key and self._stack:
            # place the open string where it will land
            partial = "".join(self._str)
            target = _follow(root, self._root, self._stack[-1])
            if isinstance(target, dict) and self._key is not None:
                target[self._key] = partial
            elif isinstance(target, list):
                target.append(partial)
        return root

    def final(self) -> Any:
        """The complete value; raises :class:`PartialJSONError` when the text is unfinished."""
        if self._literal is not None and not self._stack:
            self._finish_literal()
        if not self.complete:
            raise PartialJSONError("the JSON text is incomplete")
        return self._root


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _follow(copy_root: Any, root: Any, target: Any) -> Any:
    """Find in the copy the container that is ``target`` in the original (by identity along the last path)."""
    stack = [(copy_root, root)]
    while stack:
        c, o = stack.pop()
        if o is target:
            return c
        if isinstance(o, dict):
            stack.extend((c[k], v) for k, v in o.items() if isinstance(v, dict | list))
        elif isinstance(o, list):
            stack.extend((c[i], v) for i, v in enumerate(o) if isinstance(v, dict | list))
    return None


def _join_surrogates(text: str) -> str:
    if not any("\ud800" <= ch <= "\udfff" for ch in text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def parse_partial(text: str) -> Any:
    """Parse possibly unfinished JSON text in one go."""
    parser = PartialJSONParser()
    parser.feed(text)
    return parser.value()
