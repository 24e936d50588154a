"""AWS event-stream frames built in tests, to feed the Bedrock adapters what no recording has (exceptions,
the ``chunk`` events of ``InvokeModelWithResponseStream``), in the published framing
(https://docs.aws.amazon.com/transcribe/latest/dg/streaming-setting-up.html#streaming-event-stream): a
prelude with both lengths and its CRC32, string headers (type 7), the payload, the message CRC32. The
adapters decode them with botocore's parser, which checks both CRCs."""

from __future__ import annotations

import struct
import zlib


def frame(headers: dict[str, str], payload: bytes) -> bytes:
    encoded = b"".join(
        bytes([len(k)]) + k.encode() + b"\x07" + struct.pack(">H", len(v)) + v.encode()
        for k, v in headers.items()
    )
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack(">II", total, len(encoded))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    message = prelude + encoded + payload
    return message + struct.pack(">I", zlib.crc32(message))
