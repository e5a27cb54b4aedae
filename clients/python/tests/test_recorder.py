"""Tests of `afr_client.Recorder` (threads) and `AsyncRecorder` (asyncio) against a real
`afr serve` (never a mock): durable receipts that match the log, per-event errors, retries
that record nothing twice, across a lost answer and a killed and restarted server."""

import asyncio
import os
import threading
import time

import pytest

from afr_client import AfrError, AsyncRecorder, Recorder
from afr_serve import BAD, TOKEN, LosingProxy, event


def by_seq(matches):
    return {m["seq"]: m["event"] for m in matches}


def assert_receipts_match_the_log(receipts, events, log):
    """Each receipt names the event submitted: its seq holds that event, with the receipt's
    timestamp, and every event is in the log once."""
    assert len(log) == len(events)
    assert sorted(r["seq"] for r in receipts) == sorted(log)
    for r, ev in zip(receipts, events):
        got = log[r["seq"]]
        assert got["intent"] == ev["intent"], (r, got)
        assert got["timestamp_us"] == r["timestamp_us"]
        assert len(r["leaf_hash"]) == 64
    assert len({r["leaf_hash"] for r in receipts}) == len(receipts)


def test_submit_returns_at_once_and_receipts_match_the_log(start):
    s = start()
    events = [event(f"tool{i % 7}", n=i) for i in range(2500)]  # more than one batch's 1,000
    with Recorder(s.socket) as afr:
        tickets = [afr.submit(ev) for ev in events]
        afr.flush()
        assert afr.pending == 0 and all(t.done() for t in tickets)
        receipts = [t.wait() for t in tickets]
        assert [r["seq"] for r in receipts] == list(range(2500))  # in submit order
        assert not any(r["duplicate"] for r in receipts)
        assert_receipts_match_the_log(receipts, events, by_seq(afr.query("all")))
        assert afr.status()["events"] == 2500
        # Every event went with its own automatic key.
        keys = {t.idempotency_key for t in tickets}
        assert len(keys) == 2500 and all(k.startswith(afr.key_prefix) for k in keys)
        assert len(afr.key_prefix) == len("py-") + 24 + 1
        r = afr.record(event("one more"))
        assert r["seq"] == 2500
        assert afr.seal() == {"epoch": 25, "count": 1, "root": afr.status()["last_epoch_root"]}


def test_a_rejected_event_raises_from_wait_and_from_flush(start):
    s = start()
    afr = Recorder(s.socket)
    good1, bad, good2 = afr.submit(event("a")), afr.submit(BAD), afr.submit(event("b"))
    assert good1.wait()["seq"] == 0 and good2.wait()["seq"] == 1
    with pytest.raises(AfrError) as e:
        bad.wait()
    assert e.value.status == 422
    assert e.value.message.startswith("field `intent.agrs`: "), e.value.message
    [err] = e.value.errors
    assert err["field"] == "intent.agrs" and err["idempotency_key"] == bad.idempotency_key
    # flush() reports it once: fire-and-forget callers never lose an error.
    with pytest.raises(AfrError) as f:
        afr.flush()
    assert f.value.status == 422 and f.value.message.startswith("1 event(s) not recorded")
    assert [x["idempotency_key"] for x in f.value.errors] == [bad.idempotency_key]
    afr.flush()
    with pytest.raises(AfrError):
        bad.wait()  # the ticket keeps its error
    # Events that cannot be sent are refused by submit itself.
    with pytest.raises(ValueError):
        afr.submit("not json")
    with pytest.raises(ValueError):
        afr.submit(event("x", pad="y" * (2 << 20)))
    afr.close()
    afr.close()  # idempotent
    with pytest.raises(AfrError):
        afr.submit(event("late"))
    assert Recorder(s.socket).status()["events"] == 2


def test_caller_keys_answer_the_first_receipt(start):
    s = start()
    with Recorder(s.socket) as afr:
        first = afr.record(event("deploy"), idempotency_key="run7-step1")
        again = afr.submit(event("deploy"), "run7-step1")
        own = afr.submit(dict(event("deploy"), idempotency_key="run7-step1"))
        text = afr.submit('{"category":"shell","intent":{"tool":"t","args":{}}}', "run7-step2")
        raw = afr.submit(
            b'{"idempotency_key":"run7-step2","category":"shell","intent":{"tool":"t","args":{}}}'
        )
        for t in (again, own):
            assert t.idempotency_key == "run7-step1"
            # `line` is the event's line in the request that carried it: not compared.
            assert {**t.wait(), "duplicate": False, "line": 1} == first and t.wait()["duplicate"]
        assert text.wait()["seq"] == 1 and raw.wait()["seq"] == 1 and raw.wait()["duplicate"]
        with pytest.raises(ValueError):
            afr.submit(dict(event("x"), idempotency_key="a"), "b")
        assert afr.status()["events"] == 2


def test_a_lost_answer_is_sent_again_and_recorded_once(start, recorder_dir):
    s = start()
    proxy = LosingProxy(s.socket, recorder_dir.parent / "proxy.sock", lose=1)
    events = [event("step", n=i) for i in range(50)]
    with Recorder(proxy.path) as afr:
        tickets = [afr.submit(ev) for ev in events]
        afr.flush()
    proxy.close()
    receipts = [t.wait() for t in tickets]
    assert proxy.lost == 1 and proxy.requests >= 2
    # The lines of the lost request were recorded the first time: their retry answered the
    # first receipts, flagged duplicate; nothing is in the log twice.
    dup = [r["duplicate"] for r in receipts]
    assert any(dup) and dup == sorted(dup, reverse=True)
    assert [r["seq"] for r in receipts] == list(range(50))
    with Recorder(s.socket) as direct:
        assert_receipts_match_the_log(receipts, events, by_seq(direct.query("all")))


def test_a_killed_server_restarted_records_everything_once(start):
    s = start()
    events = [event("step", n=i) for i in range(3000)]
    tickets = []
    killed = threading.Event()
    afr = Recorder(s.socket, retry_for=120)

    def produce():
        # At an agent's pace, so that requests are in flight when the server dies; half of
        # the events before the kill, half while the server is down and after it is back.
        for i, ev in enumerate(events):
            if i == 1500:
                killed.wait(60)
            tickets.append(afr.submit(ev))
            time.sleep(0.0002)

    producer = threading.Thread(target=produce)
    producer.start()
    while len(tickets) < 800:
        time.sleep(0.005)
    assert tickets[100].wait(60)["seq"] == 100  # it is recording
    s.kill()  # SIGKILL: requests in flight lose their answers
    killed.set()
    time.sleep(0.3)  # the recorder finds no server meanwhile, and keeps retrying
    s = start()
    producer.join()
    afr.flush(timeout=120)
    receipts = [t.wait() for t in tickets]
    afr.close()
    assert sorted(r["seq"] for r in receipts) == list(range(3000))
    log = by_seq(s_query(s))
    assert [log[r["seq"]]["intent"]["args"]["n"] for r in receipts] == list(range(3000))
    assert_receipts_match_the_log(receipts, events, log)


def s_query(server):
    with Recorder(server.socket) as r:
        return r.query("all")


def test_no_server_gives_up_after_retry_for(recorder_dir):
    afr = Recorder(str(recorder_dir / "afr.sock"), retry_for=1.0)
    t0 = time.monotonic()
    t = afr.submit(event("ls"))
    with pytest.raises(TimeoutError):
        t.wait(timeout=0.1)  # still retrying
    with pytest.raises(AfrError) as e:
        t.wait()
    assert time.monotonic() - t0 >= 1.0
    assert e.value.status is None and "is `afr serve` running?" in e.value.message
    with pytest.raises(AfrError):
        afr.close()  # the flush inside reports the event
    assert not afr._thread.is_alive()


def test_an_oversized_request_is_split_down_to_the_event_at_fault(start):
    s = start("--max-event-bytes", "1000")
    afr = Recorder(s.socket)
    events = [event("a"), event("big", pad="x" * 3000), event("c"), event("d")]
    tickets = [afr.submit(ev) for ev in events]
    with pytest.raises(AfrError) as e:
        afr.flush()
    assert [x["idempotency_key"] for x in e.value.errors] == [tickets[1].idempotency_key]
    with pytest.raises(AfrError) as e:
        tickets[1].wait()
    assert e.value.status == 413
    assert [tickets[i].wait()["seq"] for i in (0, 2, 3)] == [0, 1, 2]
    afr.close()


def test_many_threads_one_recorder_and_a_small_queue(start):
    s = start()
    afr = Recorder(s.socket, max_queue=16, max_batch_lines=50)
    out = {}

    def produce(k):
        out[k] = [afr.submit(event(f"t{k}", n=i)) for i in range(300)]

    threads = [threading.Thread(target=produce, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    afr.flush()
    seqs = [t.wait()["seq"] for k in range(4) for t in out[k]]
    assert sorted(seqs) == list(range(1200))
    for k in range(4):  # each thread's events in its submit order
        mine = [t.wait()["seq"] for t in out[k]]
        assert mine == sorted(mine)
    afr.close()


def test_over_tcp_with_the_bearer_token(start, recorder_dir):
    token_file = recorder_dir.parent / "token"
    fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, (TOKEN + "\n").encode())
    os.close(fd)
    s = start("--listen", "127.0.0.1:0", "--token-file", str(token_file))
    with Recorder(url=s.url, token=TOKEN) as afr:
        assert afr.record(event("ls"))["seq"] == 0
        assert afr.status()["events"] == 1
    wrong = Recorder(url=s.url, token="not-the-token-0123456789")
    with pytest.raises(AfrError) as e:
        wrong.record(event("ls"))
    assert e.value.status == 401
    with pytest.raises(AfrError):
        wrong.close()


# -- asyncio -------------------------------------------------------------------------------


def test_async_receipts_match_the_log(start):
    s = start()
    events = [event(f"tool{i % 5}", n=i) for i in range(1500)]

    async def main():
        async with AsyncRecorder(s.socket) as afr:
            tickets = [await afr.submit(ev) for ev in events]
            first = await tickets[0]  # the sending task ran meanwhile
            await afr.flush()
            assert afr.pending == 0
            receipts = [await t for t in tickets]
            assert receipts[0] == first
            assert [r["seq"] for r in receipts] == list(range(1500))
            log = by_seq(await afr.query("all"))
            assert_receipts_match_the_log(receipts, events, log)
            assert len(await afr.query("all", limit=3)) == 3
            assert (await afr.status())["events"] == 1500
            bad = await afr.submit(BAD)
            with pytest.raises(AfrError) as e:
                await bad
            assert e.value.status == 422 and e.value.errors[0]["field"] == "intent.agrs"
            with pytest.raises(AfrError):
                await afr.flush()
            again = await afr.record(event("x"), idempotency_key=tickets[7].idempotency_key)
            assert again["duplicate"] and again["seq"] == 7
            assert await afr.seal() is None  # 1,500 events: 15 full epochs of 100
            await afr.record(event("y"))
            sealed = await afr.seal()
            assert (sealed["epoch"], sealed["count"]) == (15, 1)
            with pytest.raises(AfrError) as e:
                await afr.query("intent.tool = ")
            assert e.value.status == 400

    asyncio.run(main())


def test_async_lost_answer_and_no_server(start, recorder_dir):
    s = start()
    proxy = LosingProxy(s.socket, recorder_dir.parent / "proxy.sock", lose=2)
    events = [event("step", n=i) for i in range(40)]

    async def main():
        async with AsyncRecorder(proxy.path) as afr:
            tickets = [await afr.submit(ev) for ev in events]
            receipts = [await t.wait(timeout=60) for t in tickets]
        assert proxy.lost == 2 and any(r["duplicate"] for r in receipts)
        assert [r["seq"] for r in receipts] == list(range(40))
        nowhere = AsyncRecorder(str(recorder_dir / "none.sock"), retry_for=0.5)
        t = await nowhere.submit(event("ls"))
        with pytest.raises(asyncio.TimeoutError):
            await t.wait(timeout=0.05)
        with pytest.raises(AfrError) as e:
            await t
        assert e.value.status is None and "is `afr serve` running?" in e.value.message
        with pytest.raises(AfrError):
            await nowhere.aclose()
        return receipts

    receipts = asyncio.run(main())
    proxy.close()
    with Recorder(s.socket) as direct:
        assert_receipts_match_the_log(receipts, events, by_seq(direct.query("all")))
