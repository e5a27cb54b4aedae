"""`Recorder`: submit returns at once; a background thread sends the events in batches.

One thread per :class:`Recorder` owns one persistent connection to ``afr serve``. ``submit``
encodes the event, gives it an idempotency key and puts it on a bounded queue; the thread
takes everything queued (up to the server's 1,000 lines per request) as one NDJSON request,
so batches are as small as one event while the queue is idle and grow while a request is in
flight (one fsync then covers the whole batch under ``--durability group``)::

    submit ─▶ [queue] ─▶ thread: POST /v1/events (NDJSON) ─▶ receipts ─▶ Ticket.wait()
                                   ▲ lost connection: the same lines again (same keys)
"""

from __future__ import annotations

import atexit
import collections
import itertools
import os
import socket
import ssl
import threading
import time
import weakref
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple, TypeVar, Union

from ._client import Client
from ._types import Receipt
from ._wire import (
    MAX_BATCH_LINES,
    MAX_EVENT_BYTES,
    LINE_SLACK,
    NDJSON_TYPE,
    AfrError,
    Endpoint,
    Event,
    ProtocolError,
    Response,
    ResponseReader,
    Send,
    Settle,
    Sleep,
    deliver,
    event_line,
    request_bytes,
)

T = TypeVar("T")

#: Largest NDJSON body the recorder sends by default: half the server's default limit.
DEFAULT_BATCH_BYTES = 8 << 20
#: Events that may wait in the queue before ``submit`` blocks, by default.
DEFAULT_MAX_QUEUE = 100_000
#: Bytes the sending thread reads from the socket at a time.
RECV_BYTES = 64 * 1024
#: Failed events a recorder remembers for ``flush()`` to report in its ``errors``.
MAX_REPORTED_FAILURES = 1000


def new_key_prefix() -> str:
    """A fresh prefix for automatic idempotency keys: 96 random bits, so no two recorders
    (in any process, on any machine) make the same key."""
    return f"py-{os.urandom(12).hex()}-"


class Ticket:
    """The claim on one submitted event: :meth:`wait` returns its receipt once the event is
    durable, or raises why it was not recorded.

    ``idempotency_key`` is the key the event was sent with (the caller's, or the recorder's
    automatic one): submitting the event again with it returns the same receipt.
    """

    __slots__ = ("idempotency_key", "_owner", "_receipt", "_error")

    def __init__(self, key: str, owner: "Recorder") -> None:
        self.idempotency_key = key
        self._owner = owner
        self._receipt: Optional[Receipt] = None
        self._error: Optional[AfrError] = None

    def done(self) -> bool:
        """Whether the event is settled: recorded (durable) or refused."""
        return self._receipt is not None or self._error is not None

    def wait(self, timeout: Optional[float] = None) -> Receipt:
        """Blocks until the event is durable and returns its receipt (its ``line`` is the
        event's line in the batch that carried it).

        Raises :class:`AfrError` if it was not recorded: status 422 with ``field`` in
        ``errors[0]`` for an event the server rejected, ``None`` when the server could not be
        reached within the recorder's ``retry_for``. Raises ``TimeoutError`` when ``timeout``
        seconds pass first (the event stays queued or in flight).
        """
        if self._receipt is None and self._error is None:
            self._owner._wait_for(self, timeout)
        if self._error is not None:
            raise self._error
        assert self._receipt is not None  # settled, and not with an error
        return self._receipt

    def __repr__(self) -> str:
        state = "recorded" if self._receipt else "failed" if self._error else "pending"
        return f"<Ticket {self.idempotency_key!r} {state}>"


_open: "weakref.WeakSet[Recorder]" = weakref.WeakSet()


@atexit.register
def _close_open_recorders() -> None:
    # The sending thread is a daemon: without this, events still queued at exit were lost.
    for r in list(_open):
        try:
            r.close(timeout=r.retry_for)
        except Exception:  # noqa: BLE001 - exit goes on; the tickets hold the errors
            pass


class _Batching:
    """What :class:`Recorder` and :class:`~afr_client.AsyncRecorder` batch by: the endpoint,
    the bounds of a batch and of the queue, and the prefix of automatic idempotency keys."""

    def __init__(
        self,
        socket_path: Union[str, "os.PathLike[str]", None],
        url: Optional[str],
        token: Optional[str],
        timeout: float,
        retry_for: float,
        max_batch_lines: int,
        max_batch_bytes: int,
        max_queue: int,
        max_event_bytes: int,
        key_prefix: Optional[str],
    ) -> None:
        self.endpoint = Endpoint.resolve(socket_path, url, token)
        self.address = self.endpoint.address
        self.timeout = timeout
        self.retry_for = retry_for
        self.max_batch_lines = max(1, min(max_batch_lines, MAX_BATCH_LINES))
        self.max_batch_bytes = max(1, max_batch_bytes)
        self.max_queue = max(1, max_queue)
        self.max_line_bytes = max_event_bytes + LINE_SLACK
        self.key_prefix = new_key_prefix() if key_prefix is None else key_prefix
        self._keys = itertools.count()


class Recorder(_Batching):
    """Records events through ``afr serve`` in the background, batched.

    The connection arguments are :class:`~afr_client.Client`'s. ``retry_for`` bounds, in
    seconds, how long the recorder keeps retrying a batch without an answer (no server, lost
    connection, busy 503): every event carries an idempotency key, so a retried event is
    never recorded twice. ``max_batch_lines`` and ``max_batch_bytes`` bound one request (the
    server's defaults allow 1,000 lines and 16 MiB); ``max_queue`` bounds the events waiting
    to be sent (``submit`` blocks while it is full); ``max_event_bytes`` is the largest event
    ``submit`` takes (the server's ``--max-event-bytes``).

    Durability contract:

    - ``submit`` MUST NOT be taken as a promise: it returns once the event is queued. The
      event is durable only when ``Ticket.wait()`` returns its receipt, or ``flush()``
      returns without raising.
    - A receipt is the server's, sent only once the event is durable under its
      ``--durability`` (``group``, the default, and ``sync``: synced to disk; ``buffered``:
      written, and a crash MAY lose it).
    - An event without an ``idempotency_key`` gets one: the recorder's random prefix and a
      counter (``py-<24 hex>-<n>``). Retries reuse it, so an event is recorded at most once
      per key. The server keeps every key with its receipt, like any other key.
    - Events are sent in submit order, and recorded in that order unless one is rejected.

    One recorder may be shared by threads. Close it (or leave its ``with`` block): an open
    recorder keeps its thread, and is flushed at interpreter exit for at most ``retry_for``
    seconds.
    """

    def __init__(
        self,
        socket_path: Union[str, "os.PathLike[str]", None] = None,
        *,
        url: Optional[str] = None,
        token: Optional[str] = None,
        timeout: float = 60.0,
        retry_for: float = 60.0,
        max_batch_lines: int = MAX_BATCH_LINES,
        max_batch_bytes: int = DEFAULT_BATCH_BYTES,
        max_queue: int = DEFAULT_MAX_QUEUE,
        max_event_bytes: int = MAX_EVENT_BYTES,
        key_prefix: Optional[str] = None,
    ) -> None:
        _Batching.__init__(
            self, socket_path, url, token, timeout, retry_for,
            max_batch_lines, max_batch_bytes, max_queue, max_event_bytes, key_prefix,
        )
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)  # the sender waits for work
        self._settled = threading.Condition(self._lock)  # callers wait for tickets, room
        self._queue: Deque[Tuple[bytes, Ticket]] = collections.deque()
        self._idle = False  # the sending thread waits for work
        self._sending = False  # a thread (the sending one, or a waiting caller) sends a batch
        self._closing = False
        self._submitted = 0  # events queued so far
        self._completed = 0  # events settled so far, in submit order
        self._failures: List[Tuple[int, Ticket]] = []
        self._failure_count = 0
        self._reported = 0  # failures of events before this index were reported by flush
        self._sock: Optional[socket.socket] = None
        self._rbuf = memoryview(bytearray(RECV_BYTES))  # the sending thread's alone
        self._client: Optional[Client] = None
        self._client_lock = threading.Lock()
        self._client_args: Dict[str, Any] = dict(
            socket_path=socket_path, url=url, token=token, timeout=timeout
        )
        self._thread = threading.Thread(target=self._run, name="afr-recorder", daemon=True)
        self._thread.start()
        _open.add(self)

    # -- the API ---------------------------------------------------------------------------

    def submit(self, event: Event, idempotency_key: Optional[str] = None) -> Ticket:
        """Queues one event and returns its :class:`Ticket` at once.

        ``event`` is a mapping in the shape of ``docs/event.schema.json`` or its JSON text
        (one line), encoded here: changing a mapping afterwards changes nothing recorded.
        Its key is ``idempotency_key``, else its own ``"idempotency_key"`` member, else an
        automatic one (see the class). Raises ``ValueError``/``TypeError``
        for an event that cannot be sent (not JSON, an event over ``max_event_bytes``, a bad
        key) and :class:`AfrError` after :meth:`close`; the server's verdict comes from
        :meth:`Ticket.wait`. Blocks only while ``max_queue`` events wait.
        """
        line, key = event_line(event, idempotency_key, f"{self.key_prefix}{next(self._keys)}")
        if len(line) > self.max_line_bytes:
            raise ValueError(
                f"the event is {len(line)} bytes, over the limit of {self.max_line_bytes}"
            )
        ticket = Ticket(key, self)
        with self._lock:
            if self._closing:
                raise AfrError(None, "the recorder is closed")
            while len(self._queue) >= self.max_queue:
                self._settled.wait()
                if self._closing:
                    raise AfrError(None, "the recorder is closed")
            self._queue.append((line, ticket))
            self._submitted += 1
            if self._idle:
                self._wake.notify()
        return ticket

    def record(self, event: Event, idempotency_key: Optional[str] = None) -> Receipt:
        """``submit(event, idempotency_key).wait()``: the receipt once the event is durable."""
        return self.submit(event, idempotency_key).wait()

    def flush(self, timeout: Optional[float] = None) -> None:
        """Blocks until every event submitted before the call is settled.

        Raises :class:`AfrError` if any event submitted since the previous ``flush`` was not
        recorded (each is in ``errors``, with its ``idempotency_key``, ``field`` and
        ``message``; its ticket raises the same), and ``TimeoutError`` after ``timeout``
        seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            target = self._submitted
            while self._completed < target:
                if timeout is None and self._send_here_locked():
                    continue
                left = _left(deadline)
                if left == 0:
                    raise TimeoutError(
                        f"{target - self._completed} events not settled within {timeout} s"
                    )
                self._settled.wait(left)
            failed = [t for n, t in self._failures if self._reported <= n < target]
            count = self._failure_count
            self._failures = [(n, t) for n, t in self._failures if n >= target]
            self._failure_count = len(self._failures)
            count -= self._failure_count
            self._reported = target
        if failed:
            raise _summary(failed, count)

    def close(self, timeout: Optional[float] = None) -> None:
        """Flushes (see :meth:`flush`), then stops the thread and closes the connection.
        Idempotent; ``submit`` raises afterwards."""
        try:
            if not self._closing:
                self.flush(timeout)
        finally:
            with self._lock:
                self._closing = True
                self._wake.notify()
                self._settled.notify_all()
            self._thread.join(timeout)
            _open.discard(self)
            with self._client_lock:
                if self._client is not None:
                    self._client.close()

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            try:
                self.close()
            except AfrError:
                pass  # the exception in flight says more; the tickets hold the rest

    @property
    def pending(self) -> int:
        """Events submitted and not yet settled."""
        return self._submitted - self._completed

    def status(self) -> Dict[str, Any]:
        """The server's status (``Client.status``), on a second connection."""
        return self._call(lambda c: c.status())

    def query(self, expr: str, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        """A query of the ``afr query`` language (``Client.query``), on a second connection.
        Events still queued are not in it: :meth:`flush` first."""
        return self._call(lambda c: c.query(expr, limit))

    def seal(self) -> Optional[Dict[str, Any]]:
        """Seals the open epoch now (``Client.seal``), on a second connection."""
        return self._call(lambda c: c.seal())

    # -- the sending thread ----------------------------------------------------------------

    def _call(self, f: Callable[[Client], T]) -> T:
        with self._client_lock:
            if self._client is None:
                self._client = Client(**self._client_args)
            return f(self._client)

    def _wait_for(self, ticket: Ticket, timeout: Optional[float]) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while not ticket.done():
                if timeout is None and self._send_here_locked():
                    continue
                left = _left(deadline)
                if left == 0:
                    raise TimeoutError(
                        f"event {ticket.idempotency_key!r} not settled within {timeout} s"
                    )
                self._settled.wait(left)

    def _send_here_locked(self) -> bool:
        """Sends the next batch from the calling thread if nothing is being sent; whether it
        did. A caller about to wait for events still queued saves the hand-over to the
        sending thread and back: two thread switches, per event for one that waits on each.
        """
        if not self._queue or self._sending:
            return False
        batch = self._take_locked()
        self._lock.release()
        try:
            self._send(batch)
        finally:
            self._lock.acquire()
            self._finish_locked(batch)
        return True

    def _take_locked(self) -> List[Tuple[bytes, Ticket]]:
        """Takes the next batch off the queue (not empty) and the right to send it."""
        self._sending = True
        batch: List[Tuple[bytes, Ticket]] = []
        size = 0
        q = self._queue
        while q and len(batch) < self.max_batch_lines:
            n = len(q[0][0]) + 1
            if batch and size + n > self.max_batch_bytes:
                break
            batch.append(q.popleft())
            size += n
        if len(q) + len(batch) >= self.max_queue:
            self._settled.notify_all()  # room for blocked submitters
        return batch

    def _finish_locked(self, batch: List[Tuple[bytes, Ticket]]) -> None:
        """Counts a sent batch (every ticket settled) and gives the right to send back."""
        start = self._completed
        for k, (_, t) in enumerate(batch):
            if t._error is not None:
                self._failure_count += 1
                if len(self._failures) < MAX_REPORTED_FAILURES:
                    self._failures.append((start + k, t))
        self._completed += len(batch)
        self._sending = False
        self._settled.notify_all()
        if self._idle:
            self._wake.notify()  # more queued meanwhile, or closing

    def _send(self, batch: List[Tuple[bytes, Ticket]]) -> None:
        """Delivers a batch; every ticket in it is settled when this returns or raises."""
        err: Optional[AfrError] = None
        try:
            self._deliver(batch)
        except BaseException as e:
            err = AfrError(
                None,
                f"sending was interrupted ({e!r}); the event may have been recorded: submit "
                "it again with the same idempotency_key to learn its receipt",
            )
            raise
        finally:
            for _, t in batch:
                if not t.done():
                    t._error = err or AfrError(None, "the server answered nothing for it")

    def _run(self) -> None:
        try:
            while True:
                with self._lock:
                    while not self._queue or self._sending:
                        if self._closing and not self._queue and not self._sending:
                            return
                        self._idle = True
                        self._wake.wait()
                    self._idle = False
                    batch = self._take_locked()
                try:
                    self._send(batch)
                except Exception:  # noqa: BLE001 - settled in the batch's tickets
                    pass
                finally:
                    with self._lock:
                        self._finish_locked(batch)
        finally:
            self._disconnect()

    def _deliver(self, batch: List[Tuple[bytes, Ticket]]) -> None:
        keys = [t.idempotency_key for _, t in batch]
        steps = deliver(keys, self.retry_for, self.address)
        answer: Any = None
        while True:
            try:
                step = steps.send(answer)
            except StopIteration:
                return
            answer = None
            if isinstance(step, Send):
                body = b"".join(batch[i][0] + b"\n" for i in step.lines)
                try:
                    answer = self._exchange(body)
                except (OSError, ProtocolError) as e:
                    answer = e
            elif isinstance(step, Settle):
                for i, result in step.results:
                    t = batch[i][1]
                    if isinstance(result, AfrError):
                        t._error = result
                    else:
                        t._receipt = result
            elif isinstance(step, Sleep):
                time.sleep(max(0.0, step.seconds))

    def _exchange(self, body: bytes) -> Response:
        if self._sock is None:
            self._sock = connect(self.endpoint, self.timeout)
        sock = self._sock
        try:
            try:
                sock.sendall(request_bytes(self.endpoint, "POST", "/v1/events", NDJSON_TYPE, body))
            except (BrokenPipeError, ConnectionResetError):
                # The server may have answered before reading the whole body (413, 401, a
                # busy 503) and closed: its answer is still there to be read.
                pass
            reader = ResponseReader()
            buf = self._rbuf
            while True:
                n = sock.recv_into(buf)
                resp = reader.feed(buf[:n]) if n else reader.eof()
                if resp is not None:
                    break
                if not n:
                    raise ConnectionResetError("the server closed the connection")
        except BaseException:
            self._disconnect()
            raise
        if resp.will_close:
            self._disconnect()
        return resp

    def _disconnect(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None


def connect(endpoint: Endpoint, timeout: float) -> socket.socket:
    """A connected socket to ``endpoint`` (TLS for https)."""
    if endpoint.unix is not None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(timeout)
            s.connect(endpoint.unix)
        except BaseException:
            s.close()
            raise
        return s
    s = socket.create_connection((endpoint.host, endpoint.port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if endpoint.tls:
        return ssl.create_default_context().wrap_socket(s, server_hostname=endpoint.host)
    return s


def _left(deadline: Optional[float]) -> Optional[float]:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def _summary(failed: List[Any], count: int) -> AfrError:
    """One :class:`AfrError` for the events ``flush`` found not recorded."""
    first: AfrError = failed[0]._error
    errors = []
    for t in failed:
        e: AfrError = t._error
        item: Dict[str, Any] = (
            dict(e.errors[0]) if e.errors else {"field": "", "message": e.message}
        )
        item["idempotency_key"] = t.idempotency_key
        item["status"] = e.status
        errors.append(item)
    return AfrError(
        first.status,
        f"{count} event(s) not recorded; the first: {first.message}",
        errors=errors,
    )
