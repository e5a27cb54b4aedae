"""A client of `afr serve` for agent code: record events, read the status, run queries.

Standard library only (Python 3.8 or later; tested with 3.11). It speaks the HTTP/1.1 API of
``docs/api.md`` over the server's Unix socket (default ``.afr/afr.sock``) or over TCP with a
bearer token::

    from afr_client import Client

    afr = Client()                                   # $AFR_DIR/afr.sock, else .afr/afr.sock
    receipt = afr.record({"category": "shell", "intent": {"tool": "ls", "args": {"path": "/"}}})
    print(receipt["seq"], receipt["leaf_hash"])

    remote = Client(url="http://127.0.0.1:7070", token=open("token").readline().strip())

A receipt is the server's: ``{"line", "seq", "epoch", "leaf_hash", "timestamp_us",
"duplicate"}``, sent only once the event is durable under the server's durability mode.

Errors are :class:`AfrError`, with the HTTP status (``None`` when no answer came) and the
server's message. A request refused with 503 or 429 and a ``Retry-After`` header (the server
is busy and recorded nothing) is sent again after that many seconds, at most ``retries``
times. A request that failed without an answer may have been recorded: send it again with the
same ``idempotency_key`` to get the original receipt instead of a second event.

A :class:`Client` keeps one connection open; use one client per thread.
"""

import email.utils
import http.client
import json
import os
import socket
import time
import urllib.parse

__all__ = ["AfrError", "Client", "DEFAULT_SOCKET", "MAX_BATCH_LINES"]

#: The server's socket inside its recorder directory.
SOCKET_FILE = "afr.sock"
#: Where the client looks for the server when given neither a socket nor a URL.
DEFAULT_SOCKET = os.path.join(".afr", SOCKET_FILE)
#: Most event lines the server takes in one request (its ``--max-batch-lines`` default).
MAX_BATCH_LINES = 1000

_JSON = "application/json"
_NDJSON = "application/x-ndjson"


class AfrError(Exception):
    """A request to ``afr serve`` failed.

    ``status`` is the HTTP status, or ``None`` when no answer came (no server, connection
    lost). ``message`` is the server's ``error`` member (or, for a rejected event, its line,
    field and reason). ``errors`` lists rejected lines (``{"line", "field", "message"}``),
    ``receipts`` what was recorded before the failure, ``retry_after`` the seconds the
    server asked to wait (503/429).
    """

    def __init__(self, status, message, errors=(), receipts=(), retry_after=None):
        self.status = status
        self.message = message
        self.errors = list(errors)
        self.receipts = list(receipts)
        self.retry_after = retry_after
        where = "no answer from afr serve" if status is None else f"afr serve answered {status}"
        super().__init__(f"{where}: {message}")


class _UnixHTTPConnection(http.client.HTTPConnection):
    """``http.client.HTTPConnection`` over a Unix socket (``Host: afr``)."""

    def __init__(self, path, timeout):
        super().__init__("afr", timeout=timeout)
        self.socket_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            s.connect(self.socket_path)
        except BaseException:
            s.close()
            raise
        self.sock = s


def _line_error(e):
    """One rejected line as ``afr record`` prints it: ``line 2: field `intent.agrs`: ...``."""
    field = e.get("field")
    where = f"line {e.get('line')}: " + (f"field `{field}`: " if field else "")
    return where + str(e.get("message", ""))


def _retry_after(value):
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date), else ``None``."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return int(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _encode(event):
    """One event as one line of UTF-8 JSON: a mapping is encoded, a str or bytes is sent as is."""
    if isinstance(event, (bytes, bytearray)):
        line = bytes(event)
    elif isinstance(event, str):
        line = event.encode("utf-8")
    else:
        line = json.dumps(
            event, ensure_ascii=False, allow_nan=False, separators=(",", ":")
        ).encode("utf-8")
    if b"\n" in line:
        raise ValueError("an encoded event must be one line (no newline)")
    return line


class Client:
    """A connection to ``afr serve``.

    ``Client()`` talks to ``$AFR_DIR/afr.sock`` (else ``.afr/afr.sock``);
    ``Client(socket_path=...)`` to another socket; ``Client(url="http://127.0.0.1:7070",
    token=...)`` over TCP, sending ``Authorization: Bearer <token>``. ``timeout`` bounds each
    socket operation, in seconds; ``retries`` and ``max_retry_wait`` bound the retries of a
    busy server's 503/429 (``Retry-After`` longer than ``max_retry_wait`` is not waited for).
    """

    def __init__(
        self,
        socket_path=None,
        *,
        url=None,
        token=None,
        timeout=60.0,
        retries=3,
        max_retry_wait=30.0,
    ):
        if socket_path is not None and url is not None:
            raise ValueError("give socket_path or url, not both")
        self._headers = {}
        if token is not None:
            if not token or any(c.isspace() for c in token):
                raise ValueError("the token must be non-empty and hold no spaces")
            self._headers["Authorization"] = f"Bearer {token}"
        self.retries = retries
        self.max_retry_wait = max_retry_wait
        self._prefix = ""
        if url is None:
            if socket_path is None:
                socket_path = os.path.join(os.environ.get("AFR_DIR", ".afr"), SOCKET_FILE)
            self.address = os.fspath(socket_path)
            self._conn = _UnixHTTPConnection(self.address, timeout)
        else:
            u = urllib.parse.urlsplit(url)
            if u.scheme not in ("http", "https") or not u.hostname:
                raise ValueError(f"url must be http://HOST:PORT or https://..., not {url!r}")
            if u.query or u.fragment or u.username:
                raise ValueError("url must not carry a query, a fragment or credentials")
            self.address = url
            self._prefix = u.path.rstrip("/")
            if u.scheme == "https":
                self._conn = http.client.HTTPSConnection(u.hostname, u.port, timeout=timeout)
            else:
                self._conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
        self._used = False

    def close(self):
        """Closes the connection (the next request opens a new one)."""
        self._conn.close()
        self._used = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- the API ---------------------------------------------------------------------------

    def record(self, event, idempotency_key=None):
        """Records one event and returns its receipt once it is durable.

        ``event`` is a mapping in the shape of ``docs/event.schema.json`` (or its JSON text).
        With ``idempotency_key`` (1 to 128 bytes), a retry returns the first receipt with
        ``"duplicate": True`` instead of recording the event again. A rejected event raises
        :class:`AfrError` with status 422 naming the field.
        """
        if idempotency_key is not None:
            if not isinstance(event, dict):
                raise TypeError("idempotency_key needs the event as a dict")
            if event.get("idempotency_key", idempotency_key) != idempotency_key:
                raise ValueError("the event already carries another idempotency_key")
            event = dict(event, idempotency_key=idempotency_key)
        status, headers, body = self._request("POST", "/v1/events", _JSON, _encode(event))
        doc = self._json(status, body)
        if status == 422 and doc.get("errors"):
            raise AfrError(422, _line_error(doc["errors"][0]), errors=doc["errors"])
        if status != 200:
            raise self._failure(status, headers, doc)
        return doc["receipts"][0]

    def record_batch(self, events, batch_lines=MAX_BATCH_LINES):
        """Records events in order as NDJSON batches; returns ``(receipts, errors)``.

        Each event may carry an ``"idempotency_key"`` member. A rejected event does not stop
        the others: it is listed in ``errors`` (``{"line", "field", "message"}``) and every
        other event is recorded. ``line`` counts the events from 1 across the whole call.
        Events go ``batch_lines`` to a request; a request that fails otherwise raises
        :class:`AfrError`, whose ``receipts`` and ``errors`` hold what came before.
        """
        receipts, errors = [], []
        lines = [_encode(e) for e in events]
        for start in range(0, len(lines), max(1, batch_lines)):
            chunk = lines[start : start + max(1, batch_lines)]
            body = b"\n".join(chunk) + b"\n"
            status, headers, raw = self._request("POST", "/v1/events", _NDJSON, body)
            doc = self._json(status, raw)
            for item in doc.get("receipts", []):
                receipts.append(dict(item, line=item["line"] + start))
            for item in doc.get("errors", []):
                errors.append(dict(item, line=item["line"] + start))
            if status not in (200, 422):
                f = self._failure(status, headers, doc)
                f.receipts, f.errors = receipts, errors
                raise f
        return receipts, errors

    def status(self):
        """The server's status: the object ``afr status --json`` prints."""
        status, headers, body = self._request("GET", "/v1/status")
        doc = self._json(status, body)
        if status != 200:
            raise self._failure(status, headers, doc)
        return doc

    def query(self, expr, limit=None):
        """Runs a query of the ``afr query`` language (``docs/query.md``).

        Returns the matches in ascending ``seq``, at most ``limit``, each
        ``{"seq", "epoch", "erased", "event"}`` (``event`` is ``None`` for an erased epoch).
        """
        params = {"query": expr}
        if limit is not None:
            params["limit"] = str(int(limit))
        target = "/v1/events?" + urllib.parse.urlencode(params)
        status, headers, body = self._request("GET", target)
        if status != 200:
            raise self._failure(status, headers, self._json(status, body))
        try:
            return [json.loads(line) for line in body.splitlines() if line.strip()]
        except ValueError as e:
            raise AfrError(status, f"malformed query answer: {e}") from None

    def seal(self):
        """Seals the open epoch now; returns ``{"epoch", "count", "root"}``, or ``None`` if it
        held no event."""
        status, headers, body = self._request("POST", "/v1/seal")
        doc = self._json(status, body)
        if status != 200:
            raise self._failure(status, headers, doc)
        return doc.get("sealed")

    # -- transport -------------------------------------------------------------------------

    def _request(self, method, target, content_type=None, body=None):
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
            after = _retry_after(resp_headers.get("retry-after"))
            if after is None or waited >= self.retries or after > self.max_retry_wait:
                return status, resp_headers, data
            waited += 1
            time.sleep(after)

    def _exchange(self, method, target, body, headers):
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
    def _json(status, body):
        try:
            doc = json.loads(body) if body.strip() else {}
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            text = body.decode("utf-8", "replace").strip()[:200]
            raise AfrError(status, f"the answer is not a JSON object: {text!r}")
        return doc

    @staticmethod
    def _failure(status, headers, doc):
        return AfrError(
            status,
            doc.get("error") or f"HTTP {status}",
            errors=doc.get("errors", ()),
            receipts=doc.get("receipts", ()),
            retry_after=_retry_after(headers.get("retry-after")),
        )
