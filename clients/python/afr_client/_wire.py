"""The sans-I/O core shared by every client: where the server is, event lines, HTTP/1.1 bytes.

Nothing here opens a socket or sleeps. :class:`Endpoint` resolves the constructor arguments
once; :func:`event_line` turns an event into one NDJSON line carrying an idempotency key;
:func:`request_bytes` writes a request; :class:`ResponseReader` is fed whatever the socket
gives and returns the response once it is whole; :func:`judge_batch` reads the answer to a
batch of lines and says, line by line, what became of each and what to do with the rest. The
threaded :class:`~afr_client.Recorder` and the asyncio :class:`~afr_client.AsyncRecorder` are
thin loops of I/O around these functions, so both follow the same rules::

    event ──event_line──▶ b'{"idempotency_key":"…",…}'      (one line, its key)
    lines ──request_bytes──▶ POST /v1/events (NDJSON) ──▶ socket
    socket ──ResponseReader.feed──▶ Response ──judge_batch──▶ Verdict
"""

from __future__ import annotations

import email.utils
import json
import os
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from ._types import LineError, Receipt

#: The server's socket inside its recorder directory.
SOCKET_FILE = "afr.sock"
#: Where a client looks for the server when given neither a socket nor a URL.
DEFAULT_SOCKET = os.path.join(".afr", SOCKET_FILE)
#: Most event lines the server takes in one request (its ``--max-batch-lines`` default).
MAX_BATCH_LINES = 1000
#: The server's largest request body by default (``--max-body-bytes``).
MAX_BODY_BYTES = 16 << 20
#: The server's largest event by default (``--max-event-bytes``) ...
MAX_EVENT_BYTES = 1 << 20
#: ... and the room a line has beyond it for the idempotency member.
LINE_SLACK = 256
#: Bytes of an idempotency key, at most (the server's bound).
MAX_KEY_BYTES = 128
#: The top-level member that carries an idempotency key.
KEY_MEMBER = "idempotency_key"
#: Longest response head the readers accept (the server's own bound on request heads).
MAX_HEAD_BYTES = 64 * 1024

JSON_TYPE = "application/json"
NDJSON_TYPE = "application/x-ndjson"

#: An event as callers give it: a mapping in the shape of ``docs/event.schema.json``, or its
#: JSON text (one object, on one line) as ``str`` or ``bytes``.
Event = Union[Mapping[str, Any], str, bytes, bytearray]

_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_KEY_NEEDLE = b'"' + KEY_MEMBER.encode() + b'"'


class AfrError(Exception):
    """A request to ``afr serve`` failed, or an event was not recorded.

    ``status`` is the HTTP status, or ``None`` when no answer came (no server, connection
    lost). ``message`` is the server's ``error`` member (or, for a rejected event, its field
    and reason). ``errors`` lists rejected lines (``{"line", "field", "message"}``; from a
    :class:`~afr_client.Recorder` also ``"idempotency_key"``), ``receipts`` what was recorded
    before the failure, ``retry_after`` the seconds the server asked to wait (503/429).
    """

    def __init__(
        self,
        status: Optional[int],
        message: str,
        errors: Any = (),
        receipts: Any = (),
        retry_after: Optional[float] = None,
    ) -> None:
        self.status = status
        self.message = message
        self.errors: List[Dict[str, Any]] = list(errors)
        self.receipts: List[Receipt] = list(receipts)
        self.retry_after = retry_after
        where = "no answer from afr serve" if status is None else f"afr serve answered {status}"
        super().__init__(f"{where}: {message}")


# -- where the server is -------------------------------------------------------------------


@dataclass(frozen=True)
class Endpoint:
    """Where ``afr serve`` listens and what every request carries.

    Either ``unix`` (a socket path) or ``host``/``port`` (TCP, ``tls`` for https); ``prefix``
    is the URL's path, put before every target; ``headers`` holds ``Authorization``.
    """

    address: str
    unix: Optional[str] = None
    host: str = "afr"
    port: Optional[int] = None
    tls: bool = False
    prefix: str = ""
    headers: Tuple[Tuple[str, str], ...] = ()

    @staticmethod
    def resolve(
        socket_path: Union[str, "os.PathLike[str]", None] = None,
        url: Optional[str] = None,
        token: Optional[str] = None,
    ) -> "Endpoint":
        """The endpoint of ``Client(socket_path, url=, token=)``: ``$AFR_DIR/afr.sock`` (else
        ``.afr/afr.sock``) when given neither a socket nor a URL."""
        if socket_path is not None and url is not None:
            raise ValueError("give socket_path or url, not both")
        headers: Tuple[Tuple[str, str], ...] = ()
        if token is not None:
            if not token or any(c.isspace() for c in token):
                raise ValueError("the token must be non-empty and hold no spaces")
            headers = (("Authorization", f"Bearer {token}"),)
        if url is None:
            if socket_path is None:
                socket_path = os.path.join(os.environ.get("AFR_DIR", ".afr"), SOCKET_FILE)
            path = os.fspath(socket_path)
            return Endpoint(address=path, unix=path, headers=headers)
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"url must be http://HOST:PORT or https://..., not {url!r}")
        if u.query or u.fragment or u.username:
            raise ValueError("url must not carry a query, a fragment or credentials")
        tls = u.scheme == "https"
        port = u.port or (443 if tls else 80)
        host = u.hostname
        return Endpoint(
            address=url,
            host=host,
            port=port,
            tls=tls,
            prefix=u.path.rstrip("/"),
            headers=headers,
        )

    @property
    def host_header(self) -> str:
        if self.unix is not None:
            return "afr"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


# -- events as lines -----------------------------------------------------------------------


def encode_event(event: Event) -> bytes:
    """One event as one line of UTF-8 JSON: a mapping is encoded, a str or bytes is sent as
    is."""
    if isinstance(event, (bytes, bytearray)):
        line = bytes(event)
    elif isinstance(event, str):
        line = event.encode("utf-8")
    else:
        line = _ENCODER.encode(event).encode("utf-8")
    if b"\n" in line:
        raise ValueError("an encoded event must be one line (no newline)")
    return line


def check_key(key: Any) -> str:
    """``key`` if it is a valid idempotency key (a str of 1 to 128 UTF-8 bytes)."""
    if not isinstance(key, str):
        raise TypeError("an idempotency_key must be a str")
    if not 1 <= len(key.encode("utf-8")) <= MAX_KEY_BYTES:
        raise ValueError(f"an idempotency_key must be 1 to {MAX_KEY_BYTES} bytes of UTF-8")
    return key


def event_line(event: Event, key: Optional[str], auto_key: str) -> Tuple[bytes, str]:
    """The NDJSON line of ``event`` and the idempotency key it carries.

    The key is ``key`` if given, else the event's own ``"idempotency_key"`` member, else
    ``auto_key`` (which the caller makes unique). A mapping's own member must agree with
    ``key``; JSON text is checked only when it mentions the member at all, so the common case
    costs one substring search and no parse.
    """
    if isinstance(event, Mapping):
        own = event.get(KEY_MEMBER)
        if own is not None:
            if key is not None and own != key:
                raise ValueError("the event already carries another idempotency_key")
            return encode_event(event), check_key(own)
        if key is not None:
            check_key(key)
        line = encode_event(event)
    else:
        line = encode_event(event).strip()
        if not line.startswith(b"{") or not line.endswith(b"}"):
            raise ValueError("an event must be a JSON object")
        if _KEY_NEEDLE in line:
            try:
                doc = json.loads(line)
            except ValueError as e:
                raise ValueError(f"the event is not valid JSON: {e}") from None
            if isinstance(doc, dict) and KEY_MEMBER in doc:
                own = doc[KEY_MEMBER]
                if key is not None and own != key:
                    raise ValueError("the event already carries another idempotency_key")
                return line, check_key(own)
        if key is not None:
            check_key(key)
    if key is None:
        key = auto_key
        member = b'{"' + KEY_MEMBER.encode() + b'":"' + key.encode("ascii") + b'"'
    else:
        member = b'{"' + KEY_MEMBER.encode() + b'":' + _ENCODER.encode(key).encode("utf-8")
    rest = line[1:].lstrip()
    return (member + b"}" if rest == b"}" else member + b"," + rest), key


# -- HTTP/1.1 ------------------------------------------------------------------------------


def request_bytes(
    endpoint: Endpoint,
    method: str,
    target: str,
    content_type: Optional[str] = None,
    body: bytes = b"",
) -> bytes:
    """One HTTP/1.1 request: head and body, keep-alive."""
    head = [f"{method} {endpoint.prefix}{target} HTTP/1.1", f"Host: {endpoint.host_header}"]
    head.extend(f"{k}: {v}" for k, v in endpoint.headers)
    if content_type is not None:
        head.append(f"Content-Type: {content_type}")
    if body or method in ("POST", "PUT"):
        head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


@dataclass
class Response:
    """A whole response: status, headers (lower-case names), body, and whether the server
    closes the connection after it."""

    status: int
    headers: Dict[str, str]
    body: bytes
    will_close: bool

    def json(self) -> Dict[str, Any]:
        """The body as a JSON object; :class:`AfrError` if it is not one."""
        try:
            doc = json.loads(self.body) if self.body.strip() else {}
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            text = self.body.decode("utf-8", "replace").strip()[:200]
            raise AfrError(self.status, f"the answer is not a JSON object: {text!r}")
        return doc


class ProtocolError(Exception):
    """The bytes from the server are not an HTTP/1.1 response."""


@dataclass
class ResponseReader:
    """Parses one response from the bytes fed to it (``Content-Length``, chunked, or a body
    that ends with the connection). ``head_only`` for the answer to a ``HEAD``."""

    head_only: bool = False
    _buf: bytearray = field(default_factory=bytearray)
    _status: int = 0
    _headers: Dict[str, str] = field(default_factory=dict)
    _close: bool = False
    _length: Optional[int] = None
    _chunked: bool = False
    _head_done: bool = False
    _body: bytearray = field(default_factory=bytearray)

    def feed(self, data: Union[bytes, memoryview]) -> Optional[Response]:
        """Takes more bytes; the response once it is whole, else ``None``."""
        self._buf += data
        if not self._head_done:
            end = self._buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buf) > MAX_HEAD_BYTES:
                    raise ProtocolError("response head over 64 KiB")
                return None
            self._parse_head(bytes(self._buf[:end]))
            del self._buf[: end + 4]
            if 100 <= self._status < 200:
                # An interim answer (we never send `Expect`, but a proxy may): skip it.
                self._head_done = False
                self._headers = {}
                return self.feed(b"")
        if self._chunked:
            return self._chunks()
        if self._length is not None:
            if len(self._buf) < self._length:
                return None
            body = bytes(self._buf[: self._length])
            del self._buf[: self._length]
            return self._done(body)
        return None  # the body ends with the connection: see eof()

    def eof(self) -> Optional[Response]:
        """The connection ended: the response if it is whole now, else ``None``."""
        if self._head_done and not self._chunked and self._length is None:
            self._close = True
            body = bytes(self._buf)
            self._buf.clear()
            return self._done(body)
        return None

    def _parse_head(self, head: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise ProtocolError(f"not an HTTP/1.1 status line: {lines[0][:80]!r}")
        self._status = int(parts[1])
        headers: Dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                raise ProtocolError(f"malformed header line: {line[:80]!r}")
            name = name.strip().lower()
            value = value.strip()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        self._headers = headers
        connection = headers.get("connection", "").lower()
        self._close = "close" in connection or (
            parts[0] == "HTTP/1.0" and "keep-alive" not in connection
        )
        self._chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        self._length = None
        if self.head_only or self._status in (204, 304) or 100 <= self._status < 200:
            self._length = 0
        elif not self._chunked and "content-length" in headers:
            try:
                self._length = int(headers["content-length"])
            except ValueError:
                raise ProtocolError("malformed Content-Length") from None
        self._head_done = True

    def _chunks(self) -> Optional[Response]:
        while True:
            end = self._buf.find(b"\r\n")
            if end < 0:
                return None
            size_text = bytes(self._buf[:end]).split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise ProtocolError("malformed chunk size") from None
            if size == 0:
                # The last chunk, then trailers (perhaps none) up to an empty line.
                stop = self._buf.find(b"\r\n\r\n", end)
                if stop < 0:
                    return None
                del self._buf[: stop + 4]
                return self._done(bytes(self._body))
            if len(self._buf) < end + 2 + size + 2:
                return None
            self._body += self._buf[end + 2 : end + 2 + size]
            del self._buf[: end + 2 + size + 2]

    def _done(self, body: bytes) -> Response:
        r = Response(self._status, self._headers, body, self._close)
        self._head_done = False
        self._headers = {}
        self._body = bytearray()
        return r


def retry_after(value: Optional[str]) -> Optional[float]:
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


def failure(resp: Response, doc: Mapping[str, Any]) -> AfrError:
    """The :class:`AfrError` of an answer other than success."""
    return AfrError(
        resp.status,
        doc.get("error") or f"HTTP {resp.status}",
        errors=doc.get("errors", ()),
        receipts=doc.get("receipts", ()),
        retry_after=retry_after(resp.headers.get("retry-after")),
    )


def line_error_text(e: Mapping[str, Any]) -> str:
    """A rejected line as ``afr record`` prints it, without the line: ``field `x`: ...``."""
    f = e.get("field")
    return (f"field `{f}`: " if f else "") + str(e.get("message", ""))


# -- the answer to a batch -----------------------------------------------------------------


@dataclass
class Verdict:
    """What became of a batch of ``n`` lines, by index (0-based, in the request's order).

    ``receipts`` and ``rejected`` are final. ``retry`` lists the lines to send again (the
    server recorded nothing of them, or may have: they carry keys), after ``wait`` seconds
    (``None``: at once). ``split``: the request was too large; send each half on its own.
    ``failed`` is the error of every line in ``fail``.
    """

    receipts: Dict[int, Receipt] = field(default_factory=dict)
    rejected: Dict[int, LineError] = field(default_factory=dict)
    retry: List[int] = field(default_factory=list)
    wait: Optional[float] = None
    split: bool = False
    fail: List[int] = field(default_factory=list)
    failed: Optional[AfrError] = None


def judge_batch(resp: Response, n: int) -> Verdict:
    """Reads the answer to ``POST /v1/events`` of ``n`` NDJSON lines (``docs/api.md``)."""
    v = Verdict()
    everything = list(range(n))
    if resp.status in (429, 503) and "retry-after" in resp.headers:
        # Busy: refused before the body was read, nothing recorded.
        v.retry, v.wait = everything, retry_after(resp.headers["retry-after"]) or 0.0
        return v
    if resp.status == 413:
        if n > 1:
            v.split = True
        else:
            v.fail, v.failed = everything, failure(resp, _lenient_json(resp))
        return v
    try:
        doc = resp.json()
    except AfrError as e:
        v.fail, v.failed = everything, e
        return v
    if resp.status in (200, 422, 500, 503):
        for item in doc.get("receipts", ()):
            i = item.get("line", 0) - 1
            if 0 <= i < n:
                v.receipts[i] = item
        for item in doc.get("errors", ()):
            i = item.get("line", 0) - 1
            if 0 <= i < n:
                v.rejected[i] = item
    rest = [i for i in everything if i not in v.receipts and i not in v.rejected]
    if not rest:
        return v
    if resp.status == 503:
        # Shutting down mid-batch: the rest was not recorded; a restarted server takes it.
        v.retry = rest
        v.wait = retry_after(resp.headers.get("retry-after"))
        return v
    v.fail = rest
    if resp.status in (200, 422):
        v.failed = AfrError(resp.status, "the server answered no receipt for this event")
    else:
        v.failed = failure(resp, doc)
    return v


def _lenient_json(resp: Response) -> Dict[str, Any]:
    try:
        return resp.json()
    except AfrError:
        return {}


# -- one batch, from first send to the last receipt ---------------------------------------


@dataclass
class Send:
    """Step: send these lines (indexes into the batch) as one request; the answer (a
    :class:`Response`) or the ``OSError``/:class:`ProtocolError` that came instead is sent
    back into the generator."""

    lines: List[int]


@dataclass
class Sleep:
    """Step: wait this many seconds, then go on."""

    seconds: float


@dataclass
class Settle:
    """Step: these lines are final, each with its receipt or its error."""

    results: List[Tuple[int, Union[Receipt, AfrError]]]


Step = Union[Send, Sleep, Settle]

#: Waits between attempts to reach a server that does not answer: none for the first retry
#: (a kept-alive connection the server closed), then doubling from 50 ms to 1 s.
FIRST_BACKOFF = 0.05
MAX_BACKOFF = 1.0


def deliver(
    keys: List[str],
    retry_for: float,
    address: str,
    clock: Any = time.monotonic,
) -> Any:
    """Drives one batch of lines (their idempotency ``keys``) to the end: a generator of
    :class:`Send`, :class:`Sleep` and :class:`Settle` steps that settles every line once.

    Every line carries a key, so sending a line again is always safe: a line the server had
    recorded before its answer was lost is answered with the first receipt (``"duplicate":
    true``), never recorded twice. So a lost connection, a server that is not there (yet), a
    busy server's 503 + ``Retry-After`` and one shutting down mid-batch are all retried,
    until ``retry_for`` seconds pass without an answer that settles anything; a request too
    large (413) is split in halves until the line at fault stands alone.
    """
    work: List[List[int]] = [list(range(len(keys)))]
    deadline: Optional[float] = None
    backoff = 0.0
    while work:
        lines = work.pop(0)
        answer = yield Send(lines)
        if not isinstance(answer, Response):
            now = clock()
            if deadline is None:
                deadline = now + retry_for
            if now >= deadline:
                err = AfrError(
                    None,
                    f"{address}: {answer} (is `afr serve` running?); gave up after "
                    f"{retry_for:g} s of retries. The event may have been recorded: submit it "
                    "again with the same idempotency_key to learn its receipt",
                )
                yield Settle([(i, err) for i in lines])
                continue
            work.insert(0, lines)
            if backoff:
                yield Sleep(min(backoff, deadline - now))
            backoff = min(max(backoff * 2, FIRST_BACKOFF), MAX_BACKOFF)
            continue
        backoff = 0.0
        v = judge_batch(answer, len(lines))
        results: List[Tuple[int, Union[Receipt, AfrError]]] = [
            (lines[k], r) for k, r in v.receipts.items()
        ]
        for k, e in v.rejected.items():
            i = lines[k]
            results.append((i, AfrError(
                422, line_error_text(e), errors=[dict(e, idempotency_key=keys[i])]
            )))
        if v.failed is not None:
            results.extend((lines[k], v.failed) for k in v.fail)
        if results:
            deadline = None
            yield Settle(results)
        if v.split:
            half = len(lines) // 2
            work[0:0] = [lines[:half], lines[half:]]
        elif v.retry:
            now = clock()
            if deadline is None:
                deadline = now + retry_for
            again = [lines[k] for k in v.retry]
            if now >= deadline:
                busy = failure(answer, _lenient_json(answer))
                err = AfrError(
                    busy.status,
                    f"{busy.message} (gave up after {retry_for:g} s of retries)",
                    retry_after=busy.retry_after,
                )
                yield Settle([(i, err) for i in again])
                continue
            if v.wait:
                yield Sleep(min(v.wait, deadline - now))
            work.insert(0, again)
