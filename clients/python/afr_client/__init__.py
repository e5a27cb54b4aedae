"""The Python client of ``afr serve``: record an agent's events, read the status, run queries.

Standard library only (Python 3.8 or later; tested with 3.11), typed (``py.typed``). It
speaks the HTTP/1.1 API of ``docs/api.md`` over the server's Unix socket (default
``.afr/afr.sock``) or over TCP with a bearer token. Install it with ``pip install
./clients/python`` from a checkout.

Two ways to record:

- :class:`Recorder` (and :class:`AsyncRecorder` for asyncio), the fast path for agents:
  ``submit`` queues the event and returns a :class:`Ticket` at once (a few µs: encode and
  enqueue); a background thread (or task) sends everything queued as one NDJSON batch on a
  persistent connection, and ``ticket.wait()`` returns the receipt once the event is durable.
  ``flush()`` waits for everything submitted. Every event carries an idempotency key (an
  automatic one unless you give yours), so a batch whose answer was lost is sent again
  without ever recording an event twice::

      from afr_client import Recorder

      with Recorder() as afr:                      # $AFR_DIR/afr.sock, else .afr/afr.sock
          t = afr.submit({"category": "shell", "intent": {"tool": "ls", "args": {"path": "/"}}})
          ...                                      # the agent goes on meanwhile
          receipt = t.wait()                       # durable now
          afr.flush()                              # everything submitted is durable

      async with AsyncRecorder() as afr:
          receipt = await (await afr.submit(event))

- :class:`Client`, one request per call, answered before it returns::

      from afr_client import Client

      afr = Client()
      receipt = afr.record({"category": "shell", "intent": {"tool": "ls", "args": {}}})
      print(receipt["seq"], receipt["leaf_hash"])

      remote = Client(url="http://127.0.0.1:7070", token=open("token").readline().strip())

A receipt is the server's (:class:`Receipt`): ``{"line", "seq", "epoch", "leaf_hash",
"timestamp_us", "duplicate"}``, sent only once the event is durable under the server's
durability mode. The durability contract of the recorders is in :class:`Recorder`.

Errors are :class:`AfrError`, with the HTTP status (``None`` when no answer came) and the
server's message. ``Client`` sends a request refused with 503 or 429 and a ``Retry-After``
header (the server is busy and recorded nothing) again after that many seconds, at most
``retries`` times; a request that failed without an answer may have been recorded: send it
again with the same ``idempotency_key`` to get the original receipt instead of a second event.
The recorders do that themselves, for ``retry_for`` seconds.
"""

from ._aio import AsyncConnection, AsyncRecorder, AsyncTicket
from ._client import Client
from ._recorder import Recorder, Ticket
from ._types import LineError, Receipt
from ._wire import DEFAULT_SOCKET, MAX_BATCH_LINES, SOCKET_FILE, AfrError, Event

__all__ = [
    "AfrError",
    "AsyncConnection",
    "AsyncRecorder",
    "AsyncTicket",
    "Client",
    "DEFAULT_SOCKET",
    "Event",
    "LineError",
    "MAX_BATCH_LINES",
    "Receipt",
    "Recorder",
    "SOCKET_FILE",
    "Ticket",
    "__version__",
]

__version__ = "0.2.0"
