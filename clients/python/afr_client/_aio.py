"""`AsyncRecorder`: the :class:`~afr_client.Recorder` for asyncio code, on the event loop.

The same rules as the threaded recorder (the sans-I/O :func:`~afr_client._wire.deliver`
drives both), with a task in place of the thread and asyncio streams in place of the
socket: ``await recorder.submit(event)`` queues the event and returns an
:class:`AsyncTicket`; ``await ticket`` returns the receipt once the event is durable. No
thread, no lock: the sending task runs whenever the caller awaits something.
"""

from __future__ import annotations

import asyncio
import collections
import os
import ssl
import time
from typing import Any, Deque, Dict, Generator, List, Optional, Tuple, Union

from ._client import parse_matches, query_target
from ._recorder import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_MAX_QUEUE,
    MAX_REPORTED_FAILURES,
    _Batching,
    _summary,
)
from ._types import Receipt
from ._wire import (
    MAX_BATCH_LINES,
    MAX_EVENT_BYTES,
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
    failure,
    request_bytes,
)


class AsyncTicket:
    """The claim on one event submitted to an :class:`AsyncRecorder`: ``await ticket`` (or
    ``await ticket.wait(timeout)``) returns its receipt once the event is durable, or raises
    :class:`AfrError` as :meth:`Ticket.wait <afr_client.Ticket.wait>` does."""

    __slots__ = ("idempotency_key", "_receipt", "_error", "_waiter")

    def __init__(self, key: str) -> None:
        self.idempotency_key = key
        self._receipt: Optional[Receipt] = None
        self._error: Optional[AfrError] = None
        self._waiter: Optional["asyncio.Future[None]"] = None

    def done(self) -> bool:
        """Whether the event is settled: recorded (durable) or refused."""
        return self._receipt is not None or self._error is not None

    async def wait(self, timeout: Optional[float] = None) -> Receipt:
        """The receipt; ``asyncio.TimeoutError`` after ``timeout`` seconds (the event stays
        queued or in flight)."""
        if not self.done():
            if self._waiter is None:
                self._waiter = asyncio.get_running_loop().create_future()
            # Shielded: a cancelled caller leaves the ticket's future for the others.
            await asyncio.wait_for(asyncio.shield(self._waiter), timeout)
        if self._error is not None:
            raise self._error
        assert self._receipt is not None  # settled, and not with an error
        return self._receipt

    def __await__(self) -> Generator[Any, None, Receipt]:
        return self.wait().__await__()

    def _settle(self, result: Union[Receipt, AfrError]) -> None:
        if isinstance(result, AfrError):
            self._error = result
        else:
            self._receipt = result
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def __repr__(self) -> str:
        state = "recorded" if self._receipt else "failed" if self._error else "pending"
        return f"<AsyncTicket {self.idempotency_key!r} {state}>"


class AsyncConnection:
    """One kept-alive HTTP/1.1 connection to ``afr serve`` over asyncio streams."""

    def __init__(self, endpoint: Endpoint, timeout: float) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self._reader: Optional[asyncio.StreamReader] = None
        self._writer: Optional[asyncio.StreamWriter] = None

    async def exchange(self, request: bytes, head_only: bool = False) -> Response:
        """Sends one request and reads its answer; ``OSError`` or :class:`ProtocolError`
        when there is none (the connection is closed then)."""
        try:
            if self._writer is None:
                await asyncio.wait_for(self._connect(), self.timeout)
            assert self._reader is not None and self._writer is not None  # just connected
            self._writer.write(request)
            try:
                await self._writer.drain()
            except (BrokenPipeError, ConnectionResetError):
                pass  # an answer sent before the body was read (413, 401, 503) may be there
            rr = ResponseReader(head_only=head_only)
            while True:
                data = await asyncio.wait_for(self._reader.read(1 << 18), self.timeout)
                resp = rr.feed(data) if data else rr.eof()
                if resp is not None:
                    break
                if not data:
                    raise ConnectionResetError("the server closed the connection")
        except asyncio.TimeoutError:
            await self.close()
            raise TimeoutError(f"no answer within {self.timeout} s") from None
        except BaseException:
            await self.close()
            raise
        if resp.will_close:
            await self.close()
        return resp

    async def _connect(self) -> None:
        ep = self.endpoint
        if ep.unix is not None:
            self._reader, self._writer = await asyncio.open_unix_connection(ep.unix)
        else:
            tls = ssl.create_default_context() if ep.tls else None
            self._reader, self._writer = await asyncio.open_connection(
                ep.host, ep.port, ssl=tls, server_hostname=ep.host if tls else None
            )

    async def close(self) -> None:
        w, self._writer, self._reader = self._writer, None, None
        if w is not None:
            w.close()
            try:
                await w.wait_closed()
            except (OSError, asyncio.CancelledError):
                pass


class AsyncRecorder(_Batching):
    """Records events through ``afr serve`` from asyncio code, batched on one connection.

    The arguments and the durability contract are :class:`~afr_client.Recorder`'s. Use it
    inside one event loop: ``async with AsyncRecorder(...) as rec: t = await
    rec.submit(event); receipt = await t``. The sending task starts at the first submit.
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
        self._queue: Deque[Tuple[bytes, AsyncTicket]] = collections.deque()
        self._submitted = 0
        self._completed = 0
        self._failures: List[Tuple[int, AsyncTicket]] = []
        self._failure_count = 0
        self._reported = 0
        self._closing = False
        self._idle = False
        self._task: Optional["asyncio.Task[None]"] = None
        self._wake: Optional[asyncio.Event] = None
        self._room: Optional[asyncio.Event] = None
        self._flushes: List[Tuple[int, "asyncio.Future[None]"]] = []
        self._conn = AsyncConnection(self.endpoint, timeout)
        self._side = AsyncConnection(self.endpoint, timeout)  # status, query, seal
        self._side_lock: Optional[asyncio.Lock] = None

    # -- the API ---------------------------------------------------------------------------

    async def submit(self, event: Event, idempotency_key: Optional[str] = None) -> AsyncTicket:
        """Queues one event and returns its :class:`AsyncTicket`; waits only while
        ``max_queue`` events wait. Raises as :meth:`Recorder.submit
        <afr_client.Recorder.submit>` does."""
        line, key = event_line(event, idempotency_key, f"{self.key_prefix}{next(self._keys)}")
        if len(line) > self.max_line_bytes:
            raise ValueError(
                f"the event is {len(line)} bytes, over the limit of {self.max_line_bytes}"
            )
        if self._closing:
            raise AfrError(None, "the recorder is closed")
        self._start()
        while len(self._queue) >= self.max_queue:
            assert self._room is not None  # made by _start
            self._room.clear()
            await self._room.wait()
            if self._closing:
                raise AfrError(None, "the recorder is closed")
        ticket = AsyncTicket(key)
        self._queue.append((line, ticket))
        self._submitted += 1
        if self._idle:
            assert self._wake is not None  # made by _start
            self._wake.set()
        return ticket

    async def record(self, event: Event, idempotency_key: Optional[str] = None) -> Receipt:
        """``await (await submit(event, idempotency_key))``: the receipt once durable."""
        return await (await self.submit(event, idempotency_key))

    async def flush(self, timeout: Optional[float] = None) -> None:
        """Waits until every event submitted before the call is settled; raises as
        :meth:`Recorder.flush <afr_client.Recorder.flush>` does."""
        target = self._submitted
        if self._completed < target:
            self._start()
            fut: "asyncio.Future[None]" = asyncio.get_running_loop().create_future()
            self._flushes.append((target, fut))
            await asyncio.wait_for(asyncio.shield(fut), timeout)
        failed = [t for n, t in self._failures if self._reported <= n < target]
        count = self._failure_count
        self._failures = [(n, t) for n, t in self._failures if n >= target]
        self._failure_count = len(self._failures)
        count -= self._failure_count
        self._reported = max(self._reported, target)
        if failed:
            raise _summary(failed, count)

    async def aclose(self, timeout: Optional[float] = None) -> None:
        """Flushes, then stops the sending task and closes the connections."""
        try:
            if not self._closing:
                await self.flush(timeout)
        finally:
            self._closing = True
            if self._wake is not None:
                self._wake.set()
            if self._room is not None:
                self._room.set()
            if self._task is not None:
                try:
                    await asyncio.wait_for(asyncio.shield(self._task), timeout)
                except asyncio.TimeoutError:
                    self._task.cancel()
            await self._conn.close()
            await self._side.close()

    async def __aenter__(self) -> "AsyncRecorder":
        return self

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            await self.aclose()
        else:
            try:
                await self.aclose()
            except AfrError:
                pass  # the exception in flight says more; the tickets hold the rest

    @property
    def pending(self) -> int:
        """Events submitted and not yet settled."""
        return self._submitted - self._completed

    async def status(self) -> Dict[str, Any]:
        """The server's status (the object ``afr status --json`` prints)."""
        resp = await self._side_request("GET", "/v1/status")
        doc = resp.json()
        if resp.status != 200:
            raise failure(resp, doc)
        return doc

    async def query(self, expr: str, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        """A query of the ``afr query`` language, as ``Client.query``. Events still queued
        are not in it: :meth:`flush` first."""
        resp = await self._side_request("GET", query_target(expr, limit))
        if resp.status != 200:
            raise failure(resp, resp.json())
        return parse_matches(resp.status, resp.body)

    async def seal(self) -> Optional[Dict[str, Any]]:
        """Seals the open epoch now; ``{"epoch", "count", "root"}`` or ``None``."""
        resp = await self._side_request("POST", "/v1/seal")
        doc = resp.json()
        if resp.status != 200:
            raise failure(resp, doc)
        sealed: Optional[Dict[str, Any]] = doc.get("sealed")
        return sealed

    # -- the sending task ------------------------------------------------------------------

    async def _side_request(self, method: str, target: str) -> Response:
        if self._side_lock is None:
            self._side_lock = asyncio.Lock()
        req = request_bytes(self.endpoint, method, target)
        async with self._side_lock:
            for attempt in (0, 1):
                try:
                    return await self._side.exchange(req)
                except (OSError, ProtocolError) as e:
                    # Once more on a new connection: a kept-alive one may have been closed.
                    if attempt == 1:
                        absent = isinstance(e, (FileNotFoundError, ConnectionRefusedError))
                        hint = " (is `afr serve` running?)" if absent else ""
                        raise AfrError(None, f"{self.address}: {e}{hint}") from None
        raise AssertionError("unreachable")

    def _start(self) -> None:
        if self._task is None:
            self._wake = asyncio.Event()
            self._room = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run())

    def _take(self) -> List[Tuple[bytes, AsyncTicket]]:
        batch: List[Tuple[bytes, AsyncTicket]] = []
        size = 0
        q = self._queue
        while q and len(batch) < self.max_batch_lines:
            n = len(q[0][0]) + 1
            if batch and size + n > self.max_batch_bytes:
                break
            batch.append(q.popleft())
            size += n
        if self._room is not None:
            self._room.set()
        return batch

    async def _run(self) -> None:
        assert self._wake is not None  # made with the task
        while True:
            while not self._queue:
                if self._closing:
                    return
                self._idle = True
                self._wake.clear()
                await self._wake.wait()
            self._idle = False
            batch = self._take()
            err: Optional[AfrError] = None
            try:
                await self._deliver(batch)
            except Exception as e:  # noqa: BLE001 - every ticket must settle
                err = AfrError(None, f"the recorder's task failed: {e!r}")
            start = self._completed
            for k, (_, t) in enumerate(batch):
                if not t.done():
                    t._settle(err or AfrError(None, "the server answered nothing for it"))
                if t._error is not None:
                    self._failure_count += 1
                    if len(self._failures) < MAX_REPORTED_FAILURES:
                        self._failures.append((start + k, t))
            self._completed += len(batch)
            keep = []
            for target, fut in self._flushes:
                if target <= self._completed:
                    if not fut.done():
                        fut.set_result(None)
                else:
                    keep.append((target, fut))
            self._flushes = keep

    async def _deliver(self, batch: List[Tuple[bytes, AsyncTicket]]) -> None:
        keys = [t.idempotency_key for _, t in batch]
        steps = deliver(keys, self.retry_for, self.address, clock=time.monotonic)
        answer: Any = None
        while True:
            try:
                step = steps.send(answer)
            except StopIteration:
                return
            answer = None
            if isinstance(step, Send):
                body = b"".join(batch[i][0] + b"\n" for i in step.lines)
                req = request_bytes(self.endpoint, "POST", "/v1/events", NDJSON_TYPE, body)
                try:
                    answer = await self._conn.exchange(req)
                except (OSError, ProtocolError) as e:
                    answer = e
            elif isinstance(step, Settle):
                for i, result in step.results:
                    batch[i][1]._settle(result)
            elif isinstance(step, Sleep):
                await asyncio.sleep(max(0.0, step.seconds))
