"""`Client`: one request at a time, each call answered before it returns."""

from __future__ import annotations

import http.client
import json
import os
import socket
import time
import urllib.parse
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union, cast

from ._types import LineError, Receipt
from ._wire import (
    JSON_TYPE,
    MAX_BATCH_LINES,
    NDJSON_TYPE,
    AfrError,
    Endpoint,
    Event,
    encode_event,
    retry_after,
)

Headers = Dict[str, str]


class _UnixHTTPConnection(http.client.HTTPConnection):
    """``http.client.HTTPConnection`` over a Unix socket (``Host: afr``)."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("afr", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            s.connect(self.socket_path)
        except BaseException:
            s.close()
            raise
        self.sock = s


def _line_error(e: Mapping[str, Any]) -> str:
    """One rejected line as ``afr record`` prints it: ``line 2: field `intent.agrs`: ...``."""
    field = e.get("field")
    where = f"line {e.get('line')}: " + (f"field `{field}`: " if field else "")
    return where + str(e.get("message", ""))


class Client:
    """A connection to ``afr serve``: each call sends one request and returns its answer.

    ``Client()`` talks to ``$AFR_DIR/afr.sock`` (else ``.afr/afr.sock``);
    ``Client(socket_path=...)`` to another socket; ``Client(url="http://127.0.0.1:7070",
    token=...)`` over TCP, sending ``Authorization: Bearer <token>``. ``timeout`` bounds each
    socket operation, in seconds; ``retries`` and ``max_retry_wait`` bound the retries of a
    busy server's 503/429 (``Retry-After`` longer than ``max_retry_wait`` is not waited for).

    A client keeps one connection open; use one client per thread.
    """

    def __init__(
        self,
        socket_path: Union[str, "os.PathLike[str]", None] = None,
        *,
        url: Optional[str] = None,
        token: Optional[str] = None,
        timeout: float = 60.0,
        retries: int = 3,
        max_retry_wait: float = 30.0,
    ) -> None:
        self.endpoint = Endpoint.resolve(socket_path, url, token)
        self.address = self.endpoint.address
        self._headers: Headers = dict(self.endpoint.headers)
        self.retries = retries
        self.max_retry_wait = max_retry_wait
        self._prefix = self.endpoint.prefix
        ep = self.endpoint
        self._conn: http.client.HTTPConnection
        if ep.unix is not None:
            self._conn = _UnixHTTPConnection(ep.unix, timeout)
        elif ep.tls:
            self._conn = http.client.HTTPSConnection(ep.host, ep.port, timeout=timeout)
        else:
            self._conn = http.client.HTTPConnection(ep.host, ep.port, timeout=timeout)
        self._used = False

    def close(self) -> None:
        """Closes the connection (the next request opens a new one)."""
        self._conn.close()
        self._used = False

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the API ---------------------------------------------------------------------------

    def record(self, event: Event, idempotency_key: Optional[str] = None) -> Receipt:
        """Records one event and returns its receipt once it is durable.

        ``event`` is a mapping in the shape of ``docs/event.schema.json`` (or its JSON text).
        With ``idempotency_key`` (1 to 128 bytes), a retry returns the first receipt with
        ``"duplicate": True`` instead of recording the event again. A rejected event raises
        :class:`AfrError` with status 422 naming the field.
        """
        if idempotency_key is not None:
            if not isinstance(event, Mapping):
                raise TypeError("idempotency_key needs the event as a dict")
            if event.get("idempotency_key", idempotency_key) != idempotency_key:
                raise ValueError("the event already carries another idempotency_key")
            event = dict(event, idempotency_key=idempotency_key)
        status, headers, body = self._request("POST", "/v1/events", JSON_TYPE, encode_event(event))
        doc = self._json(status, body)
        if status == 422 and doc.get("errors"):
            raise AfrError(422, _line_error(doc["errors"][0]), errors=doc["errors"])
        if status != 200:
            raise self._failure(status, headers, doc)
        receipt: Receipt = doc["receipts"][0]
        return receipt

    def record_batch(
        self, events: Iterable[Event], batch_lines: int = MAX_BATCH_LINES
    ) -> Tuple[List[Receipt], List[LineError]]:
        """Records events in order as NDJSON batches; returns ``(receipts, errors)``.

        Each event may carry an ``"idempotency_key"`` member. A rejected event does not stop
        the others: it is listed in ``errors`` (``{"line", "field", "message"}``) and every
        other event is recorded. ``line`` counts the events from 1 across the whole call.
        Events go ``batch_lines`` to a request; a request that fails otherwise raises
        :class:`AfrError`, whose ``receipts`` and ``errors`` hold what came before.
        """
        receipts: List[Receipt] = []
        errors: List[LineError] = []
        lines = [encode_event(e) for e in events]
        step = max(1, batch_lines)
        for start in range(0, len(lines), step):
            chunk = lines[start : start + step]
            body = b"\n".join(chunk) + b"\n"
            status, headers, raw = self._request("POST", "/v1/events", NDJSON_TYPE, body)
            doc = self._json(status, raw)
            for item in doc.get("receipts", []):
                receipts.append(cast(Receipt, dict(item, line=item["line"] + start)))
            for item in doc.get("errors", []):
                errors.append(cast(LineError, dict(item, line=item["line"] + start)))
            if status not in (200, 422):
                f = self._failure(status, headers, doc)
                f.receipts, f.errors = receipts, list(errors)  # type: ignore[arg-type]
                raise f
        return receipts, errors

    def status(self) -> Dict[str, Any]:
        """The server's status: the object ``afr status --json`` prints."""
        status, headers, body = self._request("GET", "/v1/status")
        doc = self._json(status, body)
        if status != 200:
            raise self._failure(status, headers, doc)
        return doc

    def query(self, expr: str, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        """Runs a query of the ``afr query`` language (``docs/query.md``).

        Returns the matches in ascending ``seq``, at most ``limit``, each
        ``{"seq", "epoch", "erased", "event"}`` (``event`` is ``None`` for an erased epoch).
        """
        status, headers, body = self._request("GET", query_target(expr, limit))
        if status != 200:
            raise self._failure(status, headers, self._json(status, body))
        return parse_matches(status, body)

    def seal(self) -> Optional[Dict[str, Any]]:
        """Seals the open epoch now; returns ``{"epoch", "count", "root"}``, or ``None`` if it
        held no event."""
        status, headers, body = self._request("POST", "/v1/seal")
        doc = self._json(status, body)
        if status != 200:
            raise self._failure(status, headers, doc)
        sealed: Optional[Dict[str, Any]] = doc.get("sealed")
        return sealed

    # -- transport -------------------------------------------------------------------------

    def _request(
        self,
        method: str,
        target: str,
        content_type: Optional[str] = None,
        body: Optional[bytes] = None,
    ) -> Tuple[int, Headers, bytes]:
        """Sends a request; returns ``(status, headers, body)``. Retries 503/429 with
        ``Retry-After``, and a kept-alive connection the server closed meanwhile."""
        headers = dict(self._headers)
        if content_type is not None:
            headers["Content-Type"] = content_type
        if body is None and method == "POST":
            body = b""
        waited = 0
        while True:
            status, resp_headers, data = self._exchange(
                method, self._prefix + target, body, headers
            )
            if status not in (429, 503):
                return status, resp_headers, data
            after = retry_after(resp_headers.get("retry-after"))
            if after is None or waited >= self.retries or after > self.max_retry_wait:
                return status, resp_headers, data
            waited += 1
            time.sleep(after)

    def _exchange(
        self, method: str, target: str, body: Optional[bytes], headers: Headers
    ) -> Tuple[int, Headers, bytes]:
        # A kept-alive connection may have been closed by the server since its last answer:
        # the request then fails before any answer, and is sent once more on a new one (as
        # the CLI's client does).
        for attempt in (0, 1):
            reused = self._used
            try:
                try:
                    self._conn.request(method, target, body=body, headers=headers)
                except (BrokenPipeError, ConnectionResetError):
                    # The server may have answered before reading the whole body (503 when
                    # busy, 413, 401) and closed: its answer is still there to be read.
                    if self._conn.sock is None:
                        raise
                resp = self._conn.getresponse()
                data = resp.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                self.close()
                if reused and attempt == 0:
                    continue
                raise AfrError(
                    None,
                    f"connection to {self.address} lost ({e}); the request may have been "
                    "recorded: retry it with the same idempotency keys",
                ) from None
            except (OSError, http.client.HTTPException) as e:
                self.close()
                absent = isinstance(e, (FileNotFoundError, ConnectionRefusedError))
                hint = " (is `afr serve` running?)" if absent else ""
                raise AfrError(None, f"{self.address}: {e}{hint}") from None
            self._used = not resp.will_close
            if resp.will_close:
                self._conn.close()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
        raise AssertionError("unreachable")

    @staticmethod
    def _json(status: int, body: bytes) -> Dict[str, Any]:
        try:
            doc = json.loads(body) if body.strip() else {}
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            text = body.decode("utf-8", "replace").strip()[:200]
            raise AfrError(status, f"the answer is not a JSON object: {text!r}")
        return doc

    @staticmethod
    def _failure(status: int, headers: Headers, doc: Mapping[str, Any]) -> AfrError:
        return AfrError(
            status,
            doc.get("error") or f"HTTP {status}",
            errors=doc.get("errors", ()),
            receipts=doc.get("receipts", ()),
            retry_after=retry_after(headers.get("retry-after")),
        )


def query_target(expr: str, limit: Optional[int]) -> str:
    """The target of ``GET /v1/events`` for a query."""
    params = {"query": expr}
    if limit is not None:
        params["limit"] = str(int(limit))
    return "/v1/events?" + urllib.parse.urlencode(params)


def parse_matches(status: int, body: bytes) -> List[Dict[str, Any]]:
    """The NDJSON lines of a query's answer."""
    try:
        return [json.loads(line) for line in body.splitlines() if line.strip()]
    except ValueError as e:
        raise AfrError(status, f"malformed query answer: {e}") from None
