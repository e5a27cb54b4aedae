"""Tests of `afr_client.Client` against a real `afr serve` process (never a mock).

Each test starts its own server on a fresh recorder directory (`conftest.py`) and stops it
with SIGTERM, expecting exit 0.
"""

import json
import os
import socket
import threading
import time

import pytest

from afr_client import AfrError, Client
from afr_serve import BAD, TOKEN, event


def test_record_returns_a_durable_receipt(start):
    s = start()
    c = Client(socket_path=s.socket)
    r0 = c.record(event("ls", path="/"))
    assert (r0["seq"], r0["epoch"], r0["line"], r0["duplicate"]) == (0, 0, 1, False)
    assert len(r0["leaf_hash"]) == 64 and int(r0["leaf_hash"], 16) >= 0
    assert isinstance(r0["timestamp_us"], int) and r0["timestamp_us"] > 1_600_000_000_000_000
    r1 = c.record(event("cat", path="/etc/hosts"))
    assert r1["seq"] == 1 and r1["leaf_hash"] != r0["leaf_hash"]
    [m] = c.query("seq = 1")
    assert m["event"]["intent"] == {"tool": "cat", "args": {"path": "/etc/hosts"}}
    assert m["event"]["timestamp_us"] == r1["timestamp_us"]
    c.close()


def test_a_rejected_event_raises_with_its_field(start):
    s = start()
    c = Client(socket_path=s.socket)
    with pytest.raises(AfrError) as e:
        c.record(BAD)
    assert e.value.status == 422
    assert e.value.message.startswith("line 1: field `intent.agrs`: "), e.value.message
    assert e.value.errors[0]["field"] == "intent.agrs"
    assert c.status()["events"] == 0


def test_a_batch_with_a_bad_line_records_the_others(start):
    s = start()
    c = Client(socket_path=s.socket)
    receipts, errors = c.record_batch([event("a"), event("b"), BAD, event("d")])
    assert [(r["line"], r["seq"]) for r in receipts] == [(1, 0), (2, 1), (4, 2)]
    assert [(e["line"], e["field"]) for e in errors] == [(3, "intent.agrs")]
    assert "agrs" in errors[0]["message"]
    # Split into several requests, lines still count the events of the whole call.
    receipts, errors = c.record_batch([event("e"), BAD, event("g")], batch_lines=2)
    assert [(r["line"], r["seq"]) for r in receipts] == [(1, 3), (3, 4)]
    assert [(e["line"], e["field"]) for e in errors] == [(2, "intent.agrs")]
    assert c.status()["events"] == 5
    tools = [m["event"]["intent"]["tool"] for m in c.query("all")]
    assert tools == ["a", "b", "d", "e", "g"]


def test_an_idempotent_retry_returns_the_first_receipt(start, recorder_dir):
    s = start()
    c = Client(socket_path=s.socket)
    first = c.record(event("deploy"), idempotency_key="run7-step1")
    again = c.record(event("deploy"), idempotency_key="run7-step1")
    assert again["duplicate"] is True and first["duplicate"] is False
    assert {**again, "duplicate": False} == first
    # In a batch, as a member of the event: the old key answers its receipt, a new one records.
    receipts, errors = c.record_batch(
        [
            dict(event("deploy"), idempotency_key="run7-step1"),
            dict(event("verify"), idempotency_key="run7-step2"),
        ]
    )
    assert errors == []
    assert receipts[0]["seq"] == first["seq"] and receipts[0]["duplicate"] is True
    assert receipts[1]["seq"] == 1 and receipts[1]["duplicate"] is False
    # And after a restart.
    c.close()
    code, err = s.stop()
    assert code == 0, err
    s = start()
    c = Client(socket_path=s.socket)
    after = c.record(event("deploy"), idempotency_key="run7-step1")
    assert {**after, "duplicate": False} == first and after["duplicate"] is True
    assert c.status()["events"] == 2
    with pytest.raises(AfrError) as e:
        c.record(event("x"), idempotency_key="")
    assert e.value.status == 422 and "idempotency_key" in e.value.message


def test_status_and_query_agree(start):
    s = start("--epoch-size", "10")
    c = Client(socket_path=s.socket)
    tools = ["ls", "cat", "rm"] * 9  # 27 events
    receipts, errors = c.record_batch([event(t, n=i) for i, t in enumerate(tools)])
    assert errors == [] and [r["seq"] for r in receipts] == list(range(27))
    st = c.status()
    assert st["events"] == 27 and st["sealed_epochs"] == 2 and st["open_epoch_events"] == 7
    assert len(c.query("all")) == st["events"]
    rm = c.query('intent.tool = "rm"')
    assert [m["seq"] for m in rm] == [i for i, t in enumerate(tools) if t == "rm"]
    assert all(m["epoch"] == m["seq"] // 10 and not m["erased"] for m in rm)
    assert [m["seq"] for m in c.query("all", limit=3)] == [0, 1, 2]
    assert c.seal() == {"epoch": 2, "count": 7, "root": c.status()["last_epoch_root"]}
    assert c.seal() is None
    st = c.status()
    assert (st["sealed_epochs"], st["open_epoch_events"]) == (3, 0)
    with pytest.raises(AfrError) as e:
        c.query("intent.tool = ")
    assert e.value.status == 400 and e.value.message.startswith("query: ")


def test_tcp_needs_the_bearer_token(start, recorder_dir):
    token_file = recorder_dir.parent / "token"
    fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, (TOKEN + "\n").encode())
    os.close(fd)
    s = start("--listen", "127.0.0.1:0", "--token-file", str(token_file))
    assert s.url and s.url.startswith("http://127.0.0.1:")
    tcp = Client(url=s.url, token=TOKEN)
    r = tcp.record(event("ls"))
    assert r["seq"] == 0
    over_tcp, over_unix = tcp.status(), Client(socket_path=s.socket).status()
    for st in (over_tcp, over_unix):
        st.pop("compromise_window_s")  # the age of the oldest event: grows between the calls
    assert over_tcp == over_unix
    for c in (Client(url=s.url), Client(url=s.url, token="not-the-token-0123456789")):
        with pytest.raises(AfrError) as e:
            c.record(event("ls"))
        assert e.value.status == 401 and "Bearer" in e.value.message
    assert tcp.status()["events"] == 1


def test_a_busy_server_is_retried_after_retry_after(start):
    s = start("--max-inflight", "1")
    slow_body = (json.dumps(event("slow")) + "\n").encode()

    def slow_batch():
        """A batch whose body arrives slowly: it holds the only ingest slot meanwhile."""
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(s.socket)
        c.sendall(
            b"POST /v1/events HTTP/1.1\r\nHost: afr\r\nContent-Type: application/x-ndjson\r\n"
            + f"Content-Length: {len(slow_body)}\r\n\r\n".encode()
            + slow_body[:5]
        )
        return c

    # Wait until the server holds it: a probe that would be rejected (422) is refused (503).
    # A probe can take the slot first, and the slow batch is then refused: start another.
    slow = slow_batch()
    probe = Client(socket_path=s.socket, retries=0)
    deadline = time.monotonic() + 20
    while True:
        with pytest.raises(AfrError) as e:
            probe.record(BAD)
        if e.value.status == 503:
            break
        assert e.value.status == 422 and time.monotonic() < deadline
        slow.setblocking(False)
        try:
            refused = slow.recv(65536)
        except BlockingIOError:
            refused = None
        slow.setblocking(True)
        if refused is not None:
            assert refused.startswith(b"HTTP/1.1 503 "), refused
            slow.close()
            slow = slow_batch()
        time.sleep(0.02)
    assert e.value.retry_after == 1 and "retry" in e.value.message
    # A body the server does not read: the 503 is still read after the send fails.
    with pytest.raises(AfrError) as e:
        probe.record_batch([event("big", pad="x" * 1000)] * 1000)
    assert e.value.status == 503 and e.value.receipts == []
    # A client with retries waits Retry-After (1 s) and gets through once the slot is free.
    threading.Timer(0.3, lambda: slow.sendall(slow_body[5:])).start()
    t0 = time.monotonic()
    r = Client(socket_path=s.socket).record(event("patient"))
    assert time.monotonic() - t0 >= 1.0
    assert r["seq"] == 1
    answer = slow.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200 "), answer
    slow.close()
    assert [m["event"]["intent"]["tool"] for m in probe.query("all")] == ["slow", "patient"]


def test_no_server_is_a_clear_error(recorder_dir):
    with pytest.raises(AfrError) as e:
        Client(socket_path=str(recorder_dir / "afr.sock")).status()
    assert e.value.status is None and "is `afr serve` running?" in e.value.message
