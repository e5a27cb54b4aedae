//! [`Door`]: a recorder as a process reaches it, decided in one place.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use afr_core::{EventInput, RecorderId};
use afr_recorder::{Config, LogReader, RecordError, Recorder, Store, query::Query};
use serde_json::Value;

use crate::socket::{Client, ClientError, Response};

/// Errors reaching a recorder.
#[derive(Debug, thiserror::Error)]
pub enum DoorError {
    /// The event or the query was refused before it reached the recorder.
    #[error("invalid {what}: {message}")]
    Invalid {
        /// `event` or `query`.
        what: &'static str,
        /// Why.
        message: String,
    },
    /// The store failed (opened in this process).
    #[error(transparent)]
    Recorder(#[from] RecordError),
    /// The server's socket failed.
    #[error(transparent)]
    Socket(#[from] ClientError),
    /// The server answered with an error.
    #[error("afr serve answered {status} to {route}: {message}")]
    Server {
        /// The route asked (`POST /v1/events`, ...).
        route: &'static str,
        /// HTTP status.
        status: u16,
        /// Its message.
        message: String,
    },
    /// No door is open (the recorder could not be reached earlier).
    #[error("no recorder")]
    NoRecorder,
    /// A submission failed, and so did the retry through a door opened again.
    #[error("{first}; {again}")]
    Again {
        /// The first failure.
        first: Box<DoorError>,
        /// The retry's.
        again: Box<DoorError>,
    },
    /// A command that writes was given a door that only reads.
    #[error("{0} needs a writer: start `afr serve` or run it without a reader open")]
    ReadOnly(&'static str),
}

impl DoorError {
    pub(crate) fn server(route: &'static str, r: &Response) -> DoorError {
        let json = r.json();
        let message = match json["errors"][0]["message"].as_str() {
            Some(m) => format!("{}: {m}", json["errors"][0]["field"]),
            None => r.error_message(),
        };
        DoorError::Server {
            route,
            status: r.status,
            message,
        }
    }
}

/// What a door opens onto.
#[derive(Debug)]
enum Inner {
    /// `afr serve` on `<dir>/afr.sock`.
    Served(Client),
    /// The store, opened by this process as its writer.
    Writer(Arc<Recorder>),
    /// The store, read-only (RocksDB's secondary mode: no lock, no writes).
    Reader(Box<LogReader>),
}

/// One recorder directory as a process reaches it: `afr serve` over its socket when one
/// answers, else the store itself, in-process. Every producer (the MCP gateway, the OTLP
/// receiver, `afr record`) and every command goes through here, so "is a server running?"
/// is answered once.
///
/// Writing ([`Door::submit`]) follows the recorder's contract:
///
/// - A [`Ticket`] that [`settles`](Ticket::settle) `Ok(seq)` MUST mean the event is durable
///   under the recorder's durability mode (through `afr serve`, it already is when `submit`
///   returns; in-process, once its group commit is written).
/// - An event submitted twice under one idempotency key MUST NOT be recorded twice: the
///   second settles with the first one's number, across restarts of either side.
/// - A failed submission MUST NOT have recorded anything under a different key; it MAY have
///   recorded the event under its own key (the answer was lost), so a caller retries with
///   the same key, never a new one.
/// - `submit` MUST NOT block on other producers' durability; settling MAY (group commit).
///
/// Reading never writes: a reader door never opens the store for writing, and never records
/// what producers left in their journals (see [`journal`](crate::journal)).
#[derive(Debug)]
pub struct Door {
    dir: PathBuf,
    inner: Inner,
}

/// An event handed to the recorder, durable once [`Ticket::settle`] returns `Ok`.
#[derive(Debug)]
pub enum Ticket {
    /// Recorded (or failed) already.
    Done(Result<u64, DoorError>),
    /// Sequenced by the store opened here; durable once its group commit is written.
    Pending {
        /// The recorder.
        recorder: Arc<Recorder>,
        /// The event's sequence number.
        seq: u64,
        /// Its key named an event recorded before (a retry, or the same call from another
        /// producer): this is that event, nothing new was recorded.
        known: bool,
    },
    /// The key named an event recorded before, durable: nothing new was recorded.
    Known(u64),
}

impl Ticket {
    /// The event's sequence number, known once it is sequenced (even before it is durable).
    pub fn seq(&self) -> Option<u64> {
        match self {
            Ticket::Done(Ok(seq)) | Ticket::Known(seq) | Ticket::Pending { seq, .. } => Some(*seq),
            Ticket::Done(Err(_)) => None,
        }
    }

    /// Whether the key named an event recorded before (nothing new was recorded).
    pub fn known(&self) -> bool {
        matches!(self, Ticket::Known(_) | Ticket::Pending { known: true, .. })
    }

    /// Waits until the event is durable; its sequence number.
    pub fn settle(self) -> Result<u64, DoorError> {
        match self {
            Ticket::Done(r) => r,
            Ticket::Known(seq) => Ok(seq),
            Ticket::Pending { recorder, seq, .. } => {
                Ok(recorder.wait_written(seq).map(|()| seq)?)
            }
        }
    }
}

/// `s` for a URL query value: unreserved characters kept, everything else `%XX`.
pub fn url_encode(s: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(char::from(b));
            }
            _ => {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
    out
}

/// The epoch [`Door::seal`] sealed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    /// Its number.
    pub epoch: u64,
    /// Events in it.
    pub count: u64,
    /// Its root, as hex.
    pub root: String,
}

impl Door {
    /// The door of a producer or a command that writes: `afr serve` when it answers on
    /// `dir`, else the store opened here as its writer, under `config`.
    pub fn writer(dir: &Path, config: Config) -> Result<Door, DoorError> {
        let inner = match Client::running(dir) {
            Some(c) => Inner::Served(c),
            None => Inner::Writer(Arc::new(Recorder::open(dir, config)?)),
        };
        Ok(Door {
            dir: dir.to_owned(),
            inner,
        })
    }

    pub(crate) fn served(dir: &Path, c: Client) -> Door {
        Door {
            dir: dir.to_owned(),
            inner: Inner::Served(c),
        }
    }

    /// The door of a process that opened the store itself as its writer (`afr serve`
    /// recovering journals into its own recorder before it listens).
    pub fn of_recorder(dir: &Path, recorder: Arc<Recorder>) -> Door {
        Door {
            dir: dir.to_owned(),
            inner: Inner::Writer(recorder),
        }
    }

    /// The door of a command that only reads: `afr serve` when it answers on `dir`, else the
    /// store opened read-only (no lock taken: a writer may start meanwhile).
    pub fn reader(dir: &Path) -> Result<Door, DoorError> {
        let inner = match Client::running(dir) {
            Some(c) => Inner::Served(c),
            None => Inner::Reader(Box::new(LogReader::open(dir)?)),
        };
        Ok(Door {
            dir: dir.to_owned(),
            inner,
        })
    }

    /// The recorder directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where events go, for messages.
    pub fn describe(&self) -> &'static str {
        match self.inner {
            Inner::Served(_) => "afr serve",
            Inner::Writer(_) => "the store (directly)",
            Inner::Reader(_) => "the store (read-only)",
        }
    }

    /// The server's socket client, when the door opens onto `afr serve` (for streamed
    /// answers: exports, query results).
    pub fn socket(&mut self) -> Option<&mut Client> {
        match &mut self.inner {
            Inner::Served(c) => Some(c),
            _ => None,
        }
    }

    /// The recorder opened here as the writer, if this door is one.
    pub fn recorder(&self) -> Option<&Arc<Recorder>> {
        match &self.inner {
            Inner::Writer(r) => Some(r),
            _ => None,
        }
    }

    /// The store opened here (as writer or reader), if no server is in between.
    pub fn store(&self) -> Option<&Store> {
        match &self.inner {
            Inner::Writer(r) => Some(r.store()),
            Inner::Reader(r) => Some(r.store()),
            Inner::Served(_) => None,
        }
    }

    /// The read-only log opened here, if this door is a local reader.
    pub fn log(&self) -> Option<&LogReader> {
        match &self.inner {
            Inner::Reader(r) => Some(r),
            _ => None,
        }
    }

    /// Hands `event` to the recorder under `idempotency_key` (see the contract on [`Door`]).
    /// Through `afr serve` it is durable before this returns; in the store opened here it is
    /// sequenced now and durable once the ticket settles, so that events handed over together
    /// share one synced write.
    pub fn submit(
        &mut self,
        event: &EventInput,
        idempotency_key: &str,
    ) -> Result<Ticket, DoorError> {
        match &mut self.inner {
            Inner::Writer(r) => {
                let ir = r.submit_idempotent(idempotency_key.as_bytes(), event.clone())?;
                Ok(Ticket::Pending {
                    recorder: r.clone(),
                    seq: ir.receipt.seq,
                    known: ir.duplicate,
                })
            }
            Inner::Served(c) => {
                let mut bytes = Vec::new();
                keyed_line(&mut bytes, event, idempotency_key).map_err(|e| DoorError::Invalid {
                    what: "event",
                    message: e.to_string(),
                })?;
                let r = c.request("POST", "/v1/events", Some("application/json"), &bytes)?;
                let rc = &r.json()["receipts"][0];
                match rc["seq"].as_u64() {
                    Some(seq) if r.status == 200 && rc["duplicate"] == true => {
                        Ok(Ticket::Known(seq))
                    }
                    Some(seq) if r.status == 200 => Ok(Ticket::Done(Ok(seq))),
                    _ => Err(DoorError::server("POST /v1/events", &r)),
                }
            }
            Inner::Reader(_) => Err(DoorError::ReadOnly("recording an event")),
        }
    }

    /// Hands several events to the recorder at once, each under its key, in order: through
    /// `afr serve` as NDJSON batches (one durable acknowledgement for each batch, rather than
    /// one per event); in the store opened here, as [`Door::submit`] each. One ticket per
    /// event; an event refused on its own (its line's error) fails only its ticket.
    pub fn submit_all(&mut self, events: &[(&EventInput, &str)]) -> Vec<Ticket> {
        let Inner::Served(c) = &mut self.inner else {
            return events
                .iter()
                .map(|(e, k)| self.submit(e, k).unwrap_or_else(|e| Ticket::Done(Err(e))))
                .collect();
        };
        let mut out = Vec::with_capacity(events.len());
        for chunk in events.chunks(SUBMIT_BATCH) {
            let mut body = Vec::new();
            for (event, key) in chunk {
                // An event always serialises (its JSON values came from JSON).
                let _ = keyed_line(&mut body, event, key);
                body.push(b'\n');
            }
            let answer = c.request("POST", "/v1/events", Some("application/x-ndjson"), &body);
            out.extend(batch_tickets(answer, chunk.len()));
        }
        out
    }

    /// Writes and syncs everything submitted through this door (a no-op through `afr serve`,
    /// which acknowledges only what is durable).
    pub fn flush(&self) -> Result<(), DoorError> {
        match &self.inner {
            Inner::Writer(r) => Ok(r.flush()?),
            _ => Ok(()),
        }
    }

    /// Seals the open epoch now if it holds any event.
    pub fn seal(&mut self) -> Result<Option<Sealed>, DoorError> {
        match &mut self.inner {
            Inner::Writer(r) => Ok(r.seal()?.map(|h| Sealed {
                epoch: h.epoch,
                count: h.count,
                root: h.root().to_string(),
            })),
            Inner::Served(c) => {
                let r = c.request("POST", "/v1/seal", None, b"")?;
                if r.status != 200 {
                    return Err(DoorError::server("POST /v1/seal", &r));
                }
                let v = r.json();
                let h = &v["sealed"];
                Ok(h.is_object().then(|| Sealed {
                    epoch: h["epoch"].as_u64().unwrap_or_default(),
                    count: h["count"].as_u64().unwrap_or_default(),
                    root: h["root"].as_str().unwrap_or_default().to_owned(),
                }))
            }
            Inner::Reader(_) => Err(DoorError::ReadOnly("sealing")),
        }
    }

    /// The recorder's id (its anchoring address): what a signed approval names as `recorder`.
    pub fn recorder_id(&mut self) -> Result<RecorderId, DoorError> {
        match &mut self.inner {
            Inner::Writer(r) => Ok(r.recorder_id()),
            Inner::Reader(r) => Ok(r.store().recorder_id()?),
            Inner::Served(c) => {
                let r = c.request("GET", "/v1/status", None, b"")?;
                let mut id = [0u8; 20];
                r.json()["recorder"]
                    .as_str()
                    .and_then(|s| s.strip_prefix("0x"))
                    .and_then(|h| hex::decode_to_slice(h, &mut id).ok())
                    .ok_or_else(|| DoorError::Server {
                        route: "GET /v1/status",
                        status: r.status,
                        message: "no recorder id in the answer".into(),
                    })?;
                Ok(id)
            }
        }
    }

    /// The recorder's status object (`docs/api.md`, `GET /v1/status`): the server's answer,
    /// or `local` run over the store opened here (the status needs the anchorer's tables,
    /// which this crate does not read).
    pub fn status(
        &mut self,
        local: impl FnOnce(&Store) -> Result<Value, RecordError>,
    ) -> Result<Value, DoorError> {
        match &mut self.inner {
            Inner::Served(c) => {
                let r = c.request("GET", "/v1/status", None, b"")?;
                if r.status != 200 {
                    return Err(DoorError::server("GET /v1/status", &r));
                }
                Ok(r.json())
            }
            Inner::Writer(r) => Ok(local(r.store())?),
            Inner::Reader(r) => Ok(local(r.store())?),
        }
    }

    /// The sequence numbers of the events matching `query` (the `afr query` language), at
    /// most `limit`.
    pub fn find(&mut self, query: &str, limit: usize) -> Result<Vec<u64>, DoorError> {
        let invalid = |e: &dyn std::fmt::Display| DoorError::Invalid {
            what: "query",
            message: e.to_string(),
        };
        match &mut self.inner {
            Inner::Writer(r) => {
                let q = Query::parse(query).map_err(|e| invalid(&e))?;
                let mut m = r.query(&q).map_err(|e| invalid(&e))?.matches;
                m.truncate(limit);
                Ok(m)
            }
            Inner::Reader(r) => {
                let q = Query::parse(query).map_err(|e| invalid(&e))?;
                let mut m = r.query(&q).map_err(|e| invalid(&e))?.matches;
                m.truncate(limit);
                Ok(m)
            }
            Inner::Served(c) => Ok(served_events(c, query, limit)?
                .into_iter()
                .map(|(s, _)| s)
                .collect()),
        }
    }

    /// `(seq, event)` of every event matching `query`, the event `None` where it is erased.
    pub fn events(&mut self, query: &str) -> Result<Vec<(u64, Option<Value>)>, DoorError> {
        let invalid = |e: &dyn std::fmt::Display| DoorError::Invalid {
            what: "query",
            message: e.to_string(),
        };
        let q = Query::parse(query).map_err(|e| invalid(&e))?;
        let load = |r: &LogReader| -> Result<Vec<(u64, Option<Value>)>, DoorError> {
            let res = r.query(&q).map_err(|e| invalid(&e))?;
            r.load_events(&res.matches)
                .zip(&res.matches)
                .map(|(e, &s)| Ok((s, e?.event_json())))
                .collect()
        };
        match &mut self.inner {
            Inner::Reader(r) => load(r),
            Inner::Writer(r) => {
                let res = r.query(&q).map_err(|e| invalid(&e))?;
                r.load_events(&res.matches)
                    .zip(&res.matches)
                    .map(|(e, &s)| Ok((s, e?.event_json())))
                    .collect()
            }
            Inner::Served(c) => served_events(c, query, usize::MAX),
        }
    }
}

/// Appends `event` as one JSON object with its `idempotency_key` member, as `POST /v1/events`
/// takes it.
fn keyed_line(out: &mut Vec<u8>, event: &EventInput, key: &str) -> serde_json::Result<()> {
    let mut line = serde_json::to_value(event)?;
    if let Value::Object(m) = &mut line {
        m.insert("idempotency_key".into(), key.into());
    }
    serde_json::to_writer(out, &line)
}

/// Most events in one `POST /v1/events` of [`Door::submit_all`] (the server takes 1,000).
const SUBMIT_BATCH: usize = 500;

/// The tickets of a batch of `n` lines from the server's answer: each line's receipt, or its
/// own error, or the whole batch's failure.
fn batch_tickets(answer: Result<Response, ClientError>, n: usize) -> Vec<Ticket> {
    let r = match answer {
        Ok(r) => r,
        Err(e) => {
            let message = e.to_string();
            return (0..n)
                .map(|_| {
                    Ticket::Done(Err(DoorError::Server {
                        route: "POST /v1/events",
                        status: 0,
                        message: message.clone(),
                    }))
                })
                .collect();
        }
    };
    let json = r.json();
    let mut tickets: Vec<Option<Ticket>> = (0..n).map(|_| None).collect();
    if r.status == 200 || r.status == 422 {
        let line = |v: &Value| {
            v["line"]
                .as_u64()
                .and_then(|l| usize::try_from(l).ok())
                .and_then(|l| l.checked_sub(1))
        };
        for rc in json["receipts"].as_array().into_iter().flatten() {
            if let (Some(i), Some(seq)) = (line(rc), rc["seq"].as_u64())
                && let Some(t) = tickets.get_mut(i)
            {
                *t = Some(if rc["duplicate"] == true {
                    Ticket::Known(seq)
                } else {
                    Ticket::Done(Ok(seq))
                });
            }
        }
        for e in json["errors"].as_array().into_iter().flatten() {
            if let Some(t) = line(e).and_then(|i| tickets.get_mut(i)) {
                *t = Some(Ticket::Done(Err(DoorError::Server {
                    route: "POST /v1/events",
                    status: 422,
                    message: format!(
                        "{}: {}",
                        e["field"].as_str().unwrap_or_default(),
                        e["message"].as_str().unwrap_or_default()
                    ),
                })));
            }
        }
    }
    tickets
        .into_iter()
        .map(|t| t.unwrap_or_else(|| Ticket::Done(Err(DoorError::server("POST /v1/events", &r)))))
        .collect()
}

/// `GET /v1/events?query=`: `(seq, event)` per line.
fn served_events(
    c: &mut Client,
    query: &str,
    limit: usize,
) -> Result<Vec<(u64, Option<Value>)>, DoorError> {
    let limit = limit.min(1_000_000);
    let target = format!("/v1/events?query={}&limit={limit}", url_encode(query));
    let r = c.request("GET", &target, None, b"")?;
    if r.status != 200 {
        return Err(DoorError::server("GET /v1/events", &r));
    }
    r.body
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            let bad = |m: &str| DoorError::Server {
                route: "GET /v1/events",
                status: r.status,
                message: m.to_owned(),
            };
            let v: Value = serde_json::from_slice(l).map_err(|_| bad("a line is not JSON"))?;
            let seq = v["seq"].as_u64().ok_or_else(|| bad("a line without seq"))?;
            Ok((seq, v.get("event").filter(|e| !e.is_null()).cloned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_encoding_keeps_unreserved_characters_only() {
        assert_eq!(url_encode("a-b.c_d~"), "a-b.c_d~");
        assert_eq!(url_encode("seq = 1 & x"), "seq%20%3D%201%20%26%20x");
        assert_eq!(url_encode("é"), "%C3%A9");
    }
}
