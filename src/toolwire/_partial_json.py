"""Incremental JSON parsing: feed fragments, read the value parsed so far at any time.

Each fragment is processed once (total work O(N) for N bytes, whatever the number of fragments). Values
that are complete inside one fragment are decoded by the standard library's C scanner; only what is
still open (the containers on the path to the end of the text, an open string or number) is tracked
here, and string contents are decoded in runs, not character by character.

``value()`` returns the partial value with open strings, arrays and objects closed as far as they got;
an incomplete number or literal, and a key still being read, are left out. It copies only the open
containers (the path to the end of the text): containers already closed never change again and are
shared by successive values, so its cost does not grow with what was already parsed.
"""

from __future__ import annotations

import json
import json.decoder
import json.scanner
import re
from collections.abc import Callable
from typing import Any, NoReturn

_WS = " \t\r\n"
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_MISSING = object()

# What the parser expects next.
_VALUE = 0  # a value (the top level, after ':', after ',' in an array)
_VALUE_OR_CLOSE = 1  # after '['
_KEY_OR_CLOSE = 2  # after '{'
_KEY = 3  # after ',' in an object
_COLON = 4  # after a key
_SEP = 5  # after a value inside a container: ',' or the closing bracket
_DONE = 6  # a whole top-level value was read

_WS_RUN = re.compile(r"[ \t\r\n]*")
_LITERAL_RUN = re.compile(r"[^,\]} \t\r\n]*")  # a number or true/false/null runs up to a delimiter
_SURROGATE = re.compile(r"[\ud800-\udfff]")
# Text the C scanner would decode differently from this parser (which joins surrogate pairs across
# fragments and replaces lone surrogates): such a fragment is read without the fast path.
_UNSAFE = re.compile(r"\\u[dD][89a-fA-F]|[\ud800-\udfff]")
_DELIMITERS = frozenset(",]} \t\r\n")
_CLOSERS = {"{": "}", "[": "]", '"': '"'}
_DELIMITED = (str, dict, list)  # values whose end is certain (a number or literal may go on)
# A key without escapes or surrogates, with its colon; after a value, the comma and such a key.
_KEY_COLON = re.compile(r'[ \t\r\n]*"([^"\\\ud800-\udfff]*)"[ \t\r\n]*:[ \t\r\n]*')
_COMMA_KEY = re.compile(r'[ \t\r\n]*,[ \t\r\n]*(?:"([^"\\\ud800-\udfff]*)"[ \t\r\n]*:[ \t\r\n]*)?')


class PartialJSONError(ValueError):
    """The text can no longer become valid JSON."""


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


# strict=False: control characters inside strings are accepted, as in the incremental string reader.
_DECODER = json.JSONDecoder(strict=False, parse_constant=_reject_constant)
# The standard library's decoders (C when available): one value at an index, a string's rest at an index.
_scan: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(_DECODER)  # type: ignore[arg-type]
scanstring: Callable[[str, int, bool], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


class PartialJSONParser:
    __slots__ = (
        "_esc",
        "_key",
        "_keys",
        "_literal",
        "_root",
        "_stack",
        "_state",
        "_str",
        "_str_checked",
        "_str_is_key",
        "_str_seen",
        "_unicode",
    )

    def __init__(self) -> None:
        self._root: Any = _MISSING
        self._stack: list[Any] = []  # open containers, innermost last
        self._keys: list[str | None] = []  # the key of each open container in its parent (None: a list item)
        self._state = _VALUE
        self._key: str | None = None  # the key of the value being read in the innermost object
        self._str: list[str] | None = None  # chunks of an open string
        self._str_is_key = False
        self._str_seen = -1  # the length of the open string when it was last read
        self._str_checked = 0  # the open string holds no surrogate before this index
        self._esc = False
        self._unicode: str | None = None  # collected hex digits of a \u escape
        self._literal: str | None = None  # the start of a number / true / false / null

    # -- feeding ------------------------------------------------------------------------------------

    def feed(self, text: str) -> None:
        i, n = 0, len(text)
        # Whether complete values may go to the C scanner (decided once); not worth it for a few characters.
        fast: bool | None = None if n > 16 else False
        budget = 4 * n + 256  # failed scans re-read the rest of the text: bounded, so feeding stays O(N)
        while i < n:
            if self._str is not None:
                i = self._feed_string(text, i)
                continue
            if self._literal is not None:
                i = self._feed_literal(text, i)
                continue
            state = self._state
            if fast is not False and state >= _KEY_OR_CLOSE:
                end = self._punctuation_run(text, i, state)
                if end > i:
                    i = end
                    continue
            ch = text[i]
            if ch in _WS:
                i = _WS_RUN.match(text, i).end()  # type: ignore[union-attr]  # matches the empty string
                continue
            if state <= _VALUE_OR_CLOSE and ch != "]":
                if fast is None:
                    fast = _UNSAFE.search(text) is None
                closer = _CLOSERS.get(ch)  # without one further on, a container or string is surely cut
                if fast and budget > 0 and (closer is None or text.find(closer, i + 1) != -1):
                    end = self._scan_value(text, i)
                    if end > i:
                        i = end
                        continue
                    budget -= n - i  # incomplete (or invalid): read it token by token
                i = self._value_start(ch, text, i)
            elif state in (_KEY_OR_CLOSE, _KEY) and ch == '"':
                self._str, self._str_is_key = [], True  # read like any string (escapes, surrogates)
                i += 1
            else:
                self._punctuation(ch, state)
                i += 1

    def _punctuation_run(self, text: str, i: int, state: int) -> int:
        """The usual runs in one step each: ', "key": ' or ', ' after a value, '"key": ' after '{'.
        Returns where the run ends (``i`` when there is none)."""
        if state == _SEP:
            match = _COMMA_KEY.match(text, i)
            if match is None:
                return i
            key = match.group(1)
            if isinstance(self._stack[-1], dict):
                self._state, self._key = (_KEY, None) if key is None else (_VALUE, key)
                return match.end()
            self._state = _VALUE  # a string after a comma in an array is a value
            return match.end() if key is None else match.start(1) - 1
        if state in (_KEY_OR_CLOSE, _KEY):
            match = _KEY_COLON.match(text, i)
            if match is not None:
                self._state, self._key = _VALUE, match.group(1)
                return match.end()
        return i

    def _scan_value(self, text: str, i: int) -> int:
        """A value complete in ``text``, decoded by the C scanner: where it ends, or -1."""
        try:
            value, end = _scan(text, i)
        except (StopIteration, ValueError, RecursionError):
            return -1
        if not isinstance(value, _DELIMITED) and (end == len(text) or text[end] not in _DELIMITERS):
            return -1  # a number or literal that may go on (or is invalid): read it as a token
        stack = self._stack
        if not stack:
            self._add_value(value)
        elif self._key is None:  # expecting a value, the innermost container is an array iff no key
            stack[-1].append(value)
            self._state = _SEP
        else:
            stack[-1][self._key] = value
            self._key, self._state = None, _SEP
        return end

    def _value_start(self, ch: str, text: str, i: int) -> int:
        if ch == '"':
            self._str, self._str_is_key, self._str_seen, self._str_checked = [], False, -1, 0
            return i + 1
        if ch == "{" or ch == "[":
            self._add_value({} if ch == "{" else [], opened=True)
            return i + 1
        if ch in "-0123456789tfn":
            self._literal = ""
            return self._feed_literal(text, i)
        self._fail(f"unexpected character {ch!r}")

    def _punctuation(self, ch: str, state: int) -> None:
        if state == _DONE:
            self._fail(f"unexpected {ch!r} after the top-level value")
        if ch == ",":
            if state != _SEP:
                self._fail("unexpected ','")
            self._state = _KEY if isinstance(self._stack[-1], dict) else _VALUE
        elif ch == ":":
            if state != _COLON:
                self._fail("unexpected ':'")
            self._state = _VALUE
        elif ch == "}" or ch == "]":
            # A trailing comma is tolerated (state _KEY, or _VALUE inside an array).
            if not self._stack or state == _COLON or (state == _VALUE and self._key is not None):
                self._fail(f"unexpected {ch!r}")
            if (ch == "}") != isinstance(self._stack[-1], dict):
                self._fail(f"mismatched {ch!r}")
            self._stack.pop()
            self._keys.pop()
            self._key = None
            self._state = _SEP if self._stack else _DONE
        elif state == _COLON:
            self._fail(f"expected ':' after an object key, got {ch!r}")
        elif state == _SEP:
            self._fail(f"expected ',' or a closing bracket, got {ch!r}")
        else:  # a key was expected
            self._fail(f"expected an object key, got {ch!r}")

    def _feed_literal(self, text: str, i: int) -> int:
        end = _LITERAL_RUN.match(text, i).end()  # type: ignore[union-attr]  # matches the empty string
        token = (self._literal or "") + text[i:end]
        if end == len(text):  # it may go on in the next fragment
            self._literal = token
            return end
        self._literal = None
        self._add_value(_decode_literal(token))
        return end

    def _feed_string(self, text: str, i: int) -> int:
        chunks = self._str
        assert chunks is not None
        n = len(text)
        if n - i < 16:  # a token-sized fragment: the plain loop is cheapest
            return self._feed_string_slowly(text, i, chunks)
        while i < n and (self._esc or self._unicode is not None):  # an escape cut by the last fragment
            i += self._escape_char(text[i], chunks)
        if i >= n:
            return n
        if text.find('"', i) != -1:
            try:  # the usual case: the C decoder reads the rest of the string
                rest, end = scanstring(text, i, False)
            except ValueError:  # only escaped quotes, or an escape Python does not know
                pass
            else:
                chunks.append(rest)
                self._close_string()
                return end
        elif text.find("\\", i) == -1:  # the string goes on, no escape here
            chunks.append(text[i:] if i else text)
            return n
        # The string goes on: decode a long run's escapes in C, up to one that the end of the text cuts
        # (a short one costs less read escape by escape).
        cut = _complete_escapes_end(text, i) if n - i > 32 else i
        if cut > i:
            try:
                decoded, end = scanstring(text[i:cut] + '"', 0, False)
            except ValueError:
                pass
            else:
                if end == cut - i + 1:
                    chunks.append(decoded)
                    i = cut
        return self._feed_string_slowly(text, i, chunks)

    def _feed_string_slowly(self, text: str, i: int, chunks: list[str]) -> int:
        """Escapes one by one, unknown ones kept as the escaped character; also the cut-off tail of a
        fragment (``\\``, ``\\u00``) whose escape ends in the next one."""
        n = len(text)
        quote = -2  # where the next quote is: not looked for yet (-1: none)
        while i < n:
            if self._esc or self._unicode is not None:
                i += self._escape_char(text[i], chunks)
                continue
            if quote < i and quote != -1:  # not looked for, or escaped
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

    def _escape_char(self, ch: str, chunks: list[str]) -> int:
        if self._unicode is not None:
            self._unicode += ch
            if len(self._unicode) == 4:
                chunks.append(chr(int(self._unicode, 16)))
                self._unicode = None
            return 1
        self._esc = False
        if ch == "u":
            self._unicode = ""
        else:
            chunks.append(_ESCAPES.get(ch, ch))
        return 1

    def _close_string(self) -> None:
        value = "".join(self._str or ())
        if not value.isascii() and _SURROGATE.search(value):
            value = _join_surrogates(value)
        self._str = None
        if self._str_is_key:
            self._set_key(value)
        else:
            self._add_value(value)

    def _set_key(self, key: str) -> None:
        if not key.isascii() and _SURROGATE.search(key):
            key = _join_surrogates(key)
        self._key = key
        self._state = _COLON

    def _add_value(self, value: Any, *, opened: bool = False) -> None:
        """A value read whole (``opened``: an empty container whose contents follow)."""
        state = self._state
        if state == _DONE:
            self._fail("more than one top-level value")
        if state > _VALUE_OR_CLOSE:
            self._fail("object value without a key" if state in (_KEY_OR_CLOSE, _KEY) else "unexpected value")
        key = self._key
        if not self._stack:
            self._root = value
        elif key is not None:
            self._stack[-1][key] = value
            self._key = None
        else:
            self._stack[-1].append(value)
        if opened:
            self._stack.append(value)
            self._keys.append(key)
            self._state = _KEY_OR_CLOSE if isinstance(value, dict) else _VALUE_OR_CLOSE
        else:
            self._state = _SEP if self._stack else _DONE

    def _fail(self, message: str) -> NoReturn:
        raise PartialJSONError(message)

    # -- reading --------------------------------------------------------------------------------------

    @property
    def complete(self) -> bool:
        """True once a whole top-level value has been read."""
        return self._state == _DONE and self._str is None and self._literal is None

    def value(self) -> Any:
        """The value parsed so far (``None`` before anything).

        Open containers are copied, so a later ``feed`` does not change a value already returned;
        closed ones are shared between successive values (they never change again): read, don't mutate.
        """
        open_text = self._open_text()
        if self._root is _MISSING:
            return open_text
        stack = self._stack
        if not stack:
            return self._root
        child = stack[-1].copy()
        if open_text is not None:  # place the open string where it will land
            if isinstance(child, list):
                child.append(open_text)
            elif self._key is not None:
                child[self._key] = open_text
        keys = self._keys
        for depth in range(len(stack) - 2, -1, -1):
            parent = stack[depth].copy()
            key = keys[depth + 1]
            if key is None:
                parent[-1] = child  # an open container is the last item of its array
            else:
                parent[key] = child
            child = parent
        return child

    def _open_text(self) -> str | None:
        chunks = self._str
        if chunks is None or self._str_is_key:
            return None
        if len(chunks) != 1 or len(chunks[0]) != self._str_seen:
            text = "".join(chunks)
            # A high surrogate at the very end waits for its other half.
            end = len(text) - 1 if text and "\ud800" <= text[-1] <= "\udbff" else len(text)
            if not text.isascii() and (found := _SURROGATE.search(text, self._str_checked, end)):
                # Pairs joined, lone halves replaced (as when the string closes), once: the fixed text is kept.
                start = found.start()
                fixed = _join_surrogates(text[start:end])
                text = text[:start] + fixed + text[end:]
                end = start + len(fixed)
            chunks[:] = [text]  # the next read joins two pieces, not every chunk again
            self._str_seen, self._str_checked = len(text), end
        return chunks[0][: self._str_checked]

    def final(self) -> Any:
        """The complete value; raises :class:`PartialJSONError` when the text is unfinished."""
        if self._literal is not None and not self._stack:
            token, self._literal = self._literal, None
            self._add_value(_decode_literal(token))
        if not self.complete:
            raise PartialJSONError("the JSON text is incomplete")
        return self._root


def _decode_literal(token: str) -> Any:
    try:
        return _DECODER.decode(token)
    except ValueError as exc:
        raise PartialJSONError(f"invalid literal {token!r}") from exc


def _complete_escapes_end(text: str, start: int) -> int:
    """The end of ``text[start:]`` without an escape cut by the end of the text (``\\``, ``\\u00``)."""
    n = len(text)
    slash = text.rfind("\\", start)
    if slash == -1:
        return n
    run_start = slash
    while run_start > start and text[run_start - 1] == "\\":
        run_start -= 1
    if (slash - run_start) % 2 == 1:  # the last backslash is itself escaped: nothing is cut
        return n
    if slash == n - 1 or (text[slash + 1] == "u" and n - slash < 6):
        return slash
    return n


def _join_surrogates(text: str) -> str:
    """Surrogate pairs (a character beyond the BMP escaped as two halves) joined; lone halves replaced."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def parse_partial(text: str) -> Any:
    """Parse possibly unfinished JSON text in one go."""
    parser = PartialJSONParser()
    parser.feed(text)
    return parser.value()
