"""Tests of the sans-I/O core (`afr_client._wire`): no server, no socket."""

import json

import pytest

from afr_client import AfrError
from afr_client._wire import (
    Endpoint,
    ProtocolError,
    Response,
    ResponseReader,
    Send,
    Settle,
    Sleep,
    deliver,
    event_line,
    judge_batch,
    request_bytes,
)

EV = {"category": "shell", "intent": {"tool": "ls", "args": {}}}


def feed_bytewise(reader, raw):
    """Feeds `raw` one byte at a time; the response and the byte count it needed."""
    for i in range(len(raw)):
        r = reader.feed(raw[i : i + 1])
        if r is not None:
            return r, i + 1
    return None, len(raw)


def test_a_response_with_content_length_byte_by_byte():
    raw = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}"
    r, used = feed_bytewise(ResponseReader(), raw)
    assert used == len(raw)
    assert (r.status, r.body, r.will_close) == (200, b'{"a":1}', False)
    assert r.headers["content-type"] == "application/json" and r.json() == {"a": 1}


def test_a_chunked_response_with_trailers_and_extensions():
    raw = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"4;ext=1\r\nab\r\n\r\n3\r\ncde\r\n0\r\nX-Trailer: 1\r\n\r\n"
    )
    r, used = feed_bytewise(ResponseReader(), raw)
    assert used == len(raw) and r.body == b"ab\r\ncde"
    r = ResponseReader().feed(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n")
    assert r is not None and r.body == b""


def test_a_body_ended_by_the_connection_and_close_headers():
    reader = ResponseReader()
    assert reader.feed(b"HTTP/1.0 200 OK\r\n\r\npartial") is None
    r = reader.eof()
    assert r is not None and r.body == b"partial" and r.will_close
    r = ResponseReader().feed(
        b"HTTP/1.1 413 Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    )
    assert r.status == 413 and r.will_close
    # An interim 100 Continue is skipped; eof before a whole response gives nothing.
    r = ResponseReader().feed(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n")
    assert r.status == 204 and r.body == b""
    reader = ResponseReader()
    reader.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
    assert reader.eof() is None


@pytest.mark.parametrize(
    "raw",
    [
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 abc OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ],
)
def test_malformed_responses_are_refused(raw):
    with pytest.raises(ProtocolError):
        ResponseReader().feed(raw)


def test_a_head_over_64_kib_is_refused():
    with pytest.raises(ProtocolError):
        ResponseReader().feed(b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70_000)


def test_requests_carry_host_token_type_and_length():
    unix = Endpoint.resolve("/tmp/x.sock")
    get = request_bytes(unix, "GET", "/v1/status")
    assert get == b"GET /v1/status HTTP/1.1\r\nHost: afr\r\n\r\n"
    tcp = Endpoint.resolve(url="http://127.0.0.1:7070/base/", token="t0k")
    req = request_bytes(tcp, "POST", "/v1/events", "application/x-ndjson", b"{}\n")
    assert req == (
        b"POST /base/v1/events HTTP/1.1\r\nHost: 127.0.0.1:7070\r\nAuthorization: Bearer t0k\r\n"
        b"Content-Type: application/x-ndjson\r\nContent-Length: 3\r\n\r\n{}\n"
    )
    assert request_bytes(unix, "POST", "/v1/seal").endswith(b"Content-Length: 0\r\n\r\n")
    for bad in [dict(url="ftp://x"), dict(url="http://h:1/?q=1"), dict(token="a b"),
                dict(socket_path="/s", url="http://h:1")]:
        with pytest.raises(ValueError):
            Endpoint.resolve(**bad)


def test_event_lines_carry_one_key():
    line, key = event_line(EV, None, "auto-1")
    assert key == "auto-1" and json.loads(line) == dict(EV, idempotency_key="auto-1")
    assert line.startswith(b'{"idempotency_key":"auto-1",')
    line, key = event_line(EV, "mine \u00e9\"", "auto-2")
    assert key == "mine \u00e9\"" and json.loads(line)["idempotency_key"] == key
    # The event's own member is its key; a different argument is refused.
    line, key = event_line(dict(EV, idempotency_key="own"), None, "auto-3")
    assert key == "own" and json.loads(line) == dict(EV, idempotency_key="own")
    with pytest.raises(ValueError):
        event_line(dict(EV, idempotency_key="own"), "other", "auto-4")
    # JSON text: the key is spliced in; a member already there is found, a mention inside a
    # value is not mistaken for it.
    line, key = event_line('  {"category":"shell","intent":{"tool":"ls","args":{}}} ', None, "a5")
    assert key == "a5" and json.loads(line) == dict(EV, idempotency_key="a5")
    line, key = event_line(b'{"idempotency_key":"t1","category":"shell"}', None, "a6")
    assert key == "t1" and line == b'{"idempotency_key":"t1","category":"shell"}'
    text = '{"category":"shell","intent":{"tool":"ls","args":{"idempotency_key":"x"}}}'
    line, key = event_line(text, None, "a7")
    assert key == "a7" and json.loads(line)["intent"]["args"] == {"idempotency_key": "x"}
    assert event_line("{}", None, "a8")[0] == b'{"idempotency_key":"a8"}'
    assert event_line("{ }", "k", "a9")[0] == b'{"idempotency_key":"k"}'


@pytest.mark.parametrize(
    "event,key,error",
    [("[1]", None, ValueError), ('{"a":1}\n{"b":2}', None, ValueError),
     (EV, "", ValueError), (EV, "k" * 129, ValueError), (EV, 7, TypeError),
     (dict(EV, idempotency_key=7), None, TypeError), ({"x": float("nan")}, None, ValueError)],
)
def test_events_that_cannot_be_sent(event, key, error):
    with pytest.raises(error):
        event_line(event, key, "auto")


def answer(status, doc=None, **headers):
    body = b"" if doc is None else json.dumps(doc).encode()
    return Response(status, {k.replace("_", "-"): v for k, v in headers.items()}, body, False)


def receipt(line, seq):
    return {"line": line, "seq": seq, "epoch": 0, "leaf_hash": "00" * 32,
            "timestamp_us": 1, "duplicate": False}


def test_judge_batch_reads_receipts_errors_and_failures():
    v = judge_batch(answer(422, {"receipts": [receipt(1, 0), receipt(3, 1)],
                                 "errors": [{"line": 2, "field": "f", "message": "m"}]}), 3)
    assert sorted(v.receipts) == [0, 2] and list(v.rejected) == [1] and not v.fail
    v = judge_batch(answer(503, {"error": "busy"}, retry_after="2"), 3)
    assert v.retry == [0, 1, 2] and v.wait == 2
    stopping = {"receipts": [receipt(1, 5)], "errors": [], "error": "stopping"}
    v = judge_batch(answer(503, stopping), 3)
    assert list(v.receipts) == [0] and v.retry == [1, 2]
    v = judge_batch(answer(500, {"receipts": [receipt(1, 5)], "errors": [], "error": "disk"}), 2)
    assert list(v.receipts) == [0] and v.fail == [1] and v.failed.status == 500
    assert v.failed.message == "disk"
    assert judge_batch(answer(413, {"error": "big"}), 2).split
    v = judge_batch(answer(413, {"error": "big"}), 1)
    assert v.fail == [0] and v.failed.status == 413
    v = judge_batch(answer(401, {"error": "token"}), 2)
    assert v.fail == [0, 1] and v.failed.status == 401
    v = judge_batch(Response(200, {}, b"<html>", False), 1)
    assert v.fail == [0] and "not a JSON object" in v.failed.message


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def drive(keys, answers, retry_for=10.0, clock=None):
    """Runs `deliver` with `answers(lines)` as the server; returns the settled results by
    line, the sends and the sleeps."""
    clock = clock or Clock()
    steps = deliver(keys, retry_for, "sock", clock=clock)
    results, sends, sleeps, reply = {}, [], [], None
    while True:
        try:
            step = steps.send(reply)
        except StopIteration:
            return results, sends, sleeps
        reply = None
        if isinstance(step, Send):
            sends.append(list(step.lines))
            reply = answers(step.lines)
        elif isinstance(step, Sleep):
            sleeps.append(step.seconds)
            clock.now += step.seconds
        elif isinstance(step, Settle):
            for i, r in step.results:
                assert i not in results, "settled twice"
                results[i] = r


def test_deliver_retries_a_lost_answer_at_once_then_backs_off():
    tries = []

    def server(lines):
        tries.append(lines)
        if len(tries) <= 3:
            return ConnectionResetError("reset")
        return answer(200, {"receipts": [receipt(k + 1, k) for k in range(len(lines))],
                            "errors": []})

    results, sends, sleeps = drive(["a", "b"], server)
    assert sends == [[0, 1]] * 4 and sleeps == [0.05, 0.1]
    assert [results[i]["seq"] for i in (0, 1)] == [0, 1]


def test_deliver_gives_up_after_retry_for_without_an_answer():
    results, sends, sleeps = drive(["a", "b"], lambda lines: FileNotFoundError("no socket"),
                                   retry_for=3.0)
    assert sum(sleeps) == pytest.approx(3.0) and len(sends) > 3
    for r in results.values():
        assert isinstance(r, AfrError) and r.status is None
        assert "is `afr serve` running?" in r.message and "same idempotency_key" in r.message


def test_deliver_waits_retry_after_and_sends_only_the_rest():
    calls = []

    def server(lines):
        calls.append(list(lines))
        if len(calls) == 1:
            return answer(503, {"error": "busy"}, retry_after="1")
        if len(calls) == 2:  # shutting down after the first line
            return answer(503, {"receipts": [receipt(1, 0)], "errors": [], "error": "stopping"})
        return answer(200, {"receipts": [receipt(k + 1, k + 1) for k in range(len(lines))],
                            "errors": []})

    results, sends, sleeps = drive(["a", "b", "c"], server)
    assert sends == [[0, 1, 2], [0, 1, 2], [1, 2]] and sleeps == [1]
    assert [results[i]["seq"] for i in range(3)] == [0, 1, 2]


def test_deliver_splits_a_413_down_to_the_line_at_fault():
    def server(lines):
        if 2 in lines:
            return answer(413, {"error": "a line is over the limit"})
        return answer(200, {"receipts": [receipt(k + 1, i) for k, i in enumerate(lines)],
                            "errors": []})

    results, sends, _ = drive(list("abcde"), server)
    assert sends[0] == [0, 1, 2, 3, 4] and [2] in sends
    assert isinstance(results[2], AfrError) and results[2].status == 413
    assert {i: results[i]["seq"] for i in (0, 1, 3, 4)} == {0: 0, 1: 1, 3: 3, 4: 4}


def test_deliver_names_the_key_of_a_rejected_line():
    def server(lines):
        return answer(422, {"receipts": [receipt(1, 0)],
                            "errors": [{"line": 2, "field": "intent.agrs", "message": "unknown"}]})

    results, _, _ = drive(["k1", "k2"], server)
    e = results[1]
    assert e.status == 422 and e.message == "field `intent.agrs`: unknown"
    assert e.errors == [{"line": 2, "field": "intent.agrs", "message": "unknown",
                         "idempotency_key": "k2"}]


def test_deliver_bounds_a_server_busy_for_ever():
    results, sends, sleeps = drive(["a"], lambda lines: answer(503, {"error": "busy"},
                                                               retry_after="1"), retry_for=5)
    assert sum(sleeps) == pytest.approx(5) and results[0].status == 503
    assert "gave up after 5 s" in results[0].message
