"""What a kind's state is made of, declared once: each field names the state attribute judges read and how the
change filter finds that field in a raw watch line. A kind's signature (``relevance.ChangeFilter``) is derived
from its field list, so a field cannot be read by a judge and missed by the filter: a MODIFIED line whose fields
all read as before is skipped undecoded, any other line is decoded.

Identity and existence (``uid``, ``exists``, ``gone_at``) are not fields: they come from the object's metadata and
the event type, and ADDED and DELETED lines always reach the state. A field declared ``once`` is read from the
first line of an object and never changes (a pod's claims: a pod's volumes are immutable).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Signature = Callable[[bytes], bytes | None]  # None: the line cannot be compared (decode it)
IDENTITY = frozenset({"uid", "exists", "gone_at"})


def one(pattern: re.Pattern[bytes]) -> Callable[[bytes], bytes | None]:
    """The single match's group; b"" when absent; None when there are several (ambiguous: decode)."""
    def read(line: bytes) -> bytes | None:
        found = pattern.findall(line)
        if len(found) > 1:
            return None
        return found[0] if found else b""
    return read


def joined(*parts: bytes | None) -> bytes | None:
    return None if any(part is None for part in parts) else b"\0".join(part for part in parts if part is not None)


@dataclass(frozen=True)
class Field:
    attribute: str  # the state's attribute
    raw: Callable[[bytes], bytes | None] | None  # its bytes in a raw line (None: read once, never compared)

    @property
    def once(self) -> bool:
        return self.raw is None


def signature_of(fields: Sequence[Field]) -> Signature:
    """A kind's signature: the raw bytes of every field that can change, joined."""
    readers = [field.raw for field in fields if field.raw is not None]

    def signature(line: bytes) -> bytes | None:
        return joined(*(read(line) for read in readers))
    return signature


def attributes(fields: Sequence[Field]) -> frozenset[str]:
    """Every attribute a judge may read of a kind's state: its fields and its identity."""
    return IDENTITY | {field.attribute for field in fields}
