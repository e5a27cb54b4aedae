"""The shapes of the server's answers, as typed dictionaries (``docs/api.md``)."""

from __future__ import annotations

from typing import TypedDict


class Receipt(TypedDict):
    """Where an event landed, sent once it is durable under the server's durability mode.

    ``line`` is the line of the request that carried it; ``duplicate`` is true when its
    idempotency key had been recorded before, and this is that first event's receipt.
    """

    line: int
    seq: int
    epoch: int
    leaf_hash: str
    timestamp_us: int
    duplicate: bool


class LineError(TypedDict):
    """A rejected event: the line of its request, the dotted path of the offending field
    (``""`` for the whole line), and what is wrong."""

    line: int
    field: str
    message: str
