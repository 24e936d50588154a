"""The bytes of an argument-only Chat Completions chunk, learned once, to read the next ones without JSON.

A 1 MB tool call streams ~16,000 chunks that differ only in the ``arguments`` fragment (and OpenAI's
``obfuscation`` padding): ``{"id":...,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":
{"arguments":"<fragment>"}}]},...}],...,"obfuscation":"<padding>"}``. A chunk whose bytes are the learned
ones around another fragment has the learned chunk's structure, so the parser would read it the same way:
only the fragment is decoded (as one JSON string, which also checks it: escapes, ``\\u`` sequences, UTF-8,
no unescaped quote). Anything else (another key, an id, a finish reason, spaces) misses and is decoded whole.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic_core import from_json

_ARGUMENTS = b'"arguments":"'
_PADDING = b',"obfuscation":"'
_END = b'"}'


@dataclass(frozen=True, slots=True)
class ChunkTemplate:
    """The bytes before a chunk's fragment (through its opening quote) and after it (from its closing quote;
    up to the padding's value when the chunk ends with ``"obfuscation"``: that value changes per chunk)."""

    prefix: bytes
    stem: bytes
    padded: bool

    @staticmethod
    def learn(data: bytes, fragment: str) -> ChunkTemplate | None:
        """The template of ``data``, a chunk whose only arguments fragment is ``fragment`` (None when its
        bytes do not show that fragment in one place, e.g. a key with spaces around its colon)."""
        start = data.find(_ARGUMENTS)
        if start < 0 or data.find(_ARGUMENTS, start + 1) >= 0:
            return None
        start += len(_ARGUMENTS)
        end = _closing_quote(data, start)
        if end < 0:
            return None
        suffix = data[end:]
        padding = suffix.rfind(_PADDING)
        padded = padding >= 0 and suffix.endswith(_END) and suffix[padding + len(_PADDING) : -2].isalnum()
        stem = suffix[: padding + len(_PADDING)] if padded else suffix
        template = ChunkTemplate(data[:start], stem, padded)
        return template if template.fragment(data) == fragment else None

    def fragment(self, data: bytes) -> str | None:
        """The fragment of a chunk with these bytes around it; None: not this shape (or an empty fragment)."""
        prefix, stem = self.prefix, self.stem
        if not data.startswith(prefix):
            return None
        start = len(prefix)
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
