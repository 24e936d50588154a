"""The bytes of an event carrying only the next tool-argument fragment, learned once, to read the next ones
without JSON decoding.

A 1 MB tool call streams ~16,000 events that differ only in the fragment, OpenAI's ``obfuscation`` padding
and, on the Responses wire, a ``sequence_number``: ``{"id":...,"choices":[{"index":0,"delta":{"tool_calls":
[{"index":0,"function":{"arguments":"<fragment>"}}]},...}],...,"obfuscation":"<padding>"}``. An event whose
bytes are the learned ones around another fragment (padding letters and digits, sequence number digits) has
the learned event's structure, so a parser reads it the same way. Only the fragment is decoded, as one JSON
string, which also checks it (escapes, ``\\u`` sequences, UTF-8, no unescaped quote). Anything else (another
key, an id, a finish reason, spaces) misses, and the event is decoded whole.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic_core import from_json

_PADDING = b',"obfuscation":"'
_END = b'"}'
_ZERO = 0x30


@dataclass(frozen=True, slots=True)
class ChunkTemplate:
    """An event's name and its data's bytes before its fragment (through the opening quote: ``head``, then
    when there is a counter its digits, then ``tail``) and after it (``stem``, from the closing quote, up to
    the padding's value when the data ends with ``"obfuscation"``: that value changes per event)."""

    name: str
    head: bytes
    tail: bytes | None
    stem: bytes
    padded: bool

    @staticmethod
    def learn(
        name: str, data: bytes, fragment: str, *, key: bytes, counter: bytes | None = None
    ) -> ChunkTemplate | None:
        """The template of ``data``, whose only fragment is ``fragment``, the string value of ``key``
        (``b'"arguments":"'``), after the number of ``counter`` (``b'"sequence_number":'``) if it has one.
        None when its bytes do not show that fragment in one place (e.g. a key with spaces around its colon)."""
        start = data.find(key)
        if start < 0 or data.find(key, start + 1) >= 0:
            return None
        start += len(key)
        end = _closing_quote(data, start)
        if end < 0:
            return None
        head, tail = data[:start], None
        number = data.find(counter, 0, start) if counter is not None else -1
        if counter is not None and number >= 0:
            digits_end = number + len(counter)
            while data[digits_end] in b"0123456789":
                digits_end += 1
            head, tail = data[: number + len(counter)], data[digits_end:start]
        suffix = data[end:]
        padding = suffix.rfind(_PADDING)
        padded = padding >= 0 and suffix.endswith(_END) and suffix[padding + len(_PADDING) : -2].isalnum()
        stem = suffix[: padding + len(_PADDING)] if padded else suffix
        template = ChunkTemplate(name, head, tail, stem, padded)
        return template if template.fragment(name, data) == fragment else None

    def fragment(self, name: str, data: bytes) -> str | None:
        """The fragment of an event with these bytes around it; None: not this shape (or an empty fragment)."""
        head, stem = self.head, self.stem
        if name != self.name or not data.startswith(head):
            return None
        start = len(head)
        if self.tail is not None:  # the counter's digits, then the rest of the head
            after = data.find(self.tail, start)
            digits = data[start:after]
            if after < 0 or not digits.isdigit() or (digits[0] == _ZERO and len(digits) > 1):
                return None  # (a leading zero is not JSON)
            start = after + len(self.tail)
        if self.padded:
            # The first occurrence: one inside the fragment would leave it an invalid string (an escaped quote).
            end = data.find(stem, start)
            if end < 0 or not data.endswith(_END) or not data[end + len(stem) : -2].isalnum():
                return None
        elif data.endswith(stem):
            end = len(data) - len(stem)
        else:
            return None
        if end <= start:
            return None
        try:
            text = from_json(data[start - 1 : end + 1])  # the fragment with its quotes: one JSON string
        except ValueError:
            return None
        return text if type(text) is str and text else None


def _closing_quote(data: bytes, start: int) -> int:
    """The index of the quote closing the JSON string whose body starts at ``start`` (-1: none)."""
    position = start
    while True:
        quote = data.find(b'"', position)
        if quote < 0:
            return -1
        backslashes = 0
        while data[quote - 1 - backslashes] == 0x5C:  # an odd run of backslashes escapes the quote
            backslashes += 1
        if backslashes % 2 == 0:
            return quote
        position = quote + 1


__all__ = ["ChunkTemplate"]
