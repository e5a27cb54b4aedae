//! Where events go: `afr serve` when its socket answers, else the store opened directly.

use std::{path::Path, sync::Arc};

use afr_core::{EventInput, event::DEFAULT_MAX_EVENT_BYTES};
use afr_recorder::{Config, RecordError, Recorder};
use afr_server::client::{Client, ClientError};
use serde_json::Value;

/// Errors recording an event.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The event was refused by the parser (a gateway bug, or an oversize argument).
    #[error("invalid event: {0}")]
    Invalid(String),
    /// The store failed.
    #[error(transparent)]
    Recorder(#[from] RecordError),
    /// The server could not be reached.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The server answered with an error.
    #[error("afr serve answered {status}: {message}")]
    Server {
        /// HTTP status.
        status: u16,
        /// Its message.
        message: String,
    },
}

/// A recorder: through a running `afr serve`, or the store itself.
#[derive(Debug)]
pub enum Sink {
    /// `afr serve` on `<dir>/afr.sock`.
    Server(Client),
    /// The store, opened by this process (group durability).
    Direct(Arc<Recorder>),
}

/// An event handed to the recorder, durable once [`Ticket::settle`] returns `Ok`.
#[derive(Debug)]
pub enum Ticket {
    /// Recorded (or failed) already.
    Done(Result<u64, String>),
    /// Sequenced by the store opened here; durable once its group commit is written.
    Pending {
        /// The recorder.
        recorder: Arc<Recorder>,
        /// The event's sequence number.
        seq: u64,
    },
}

impl Ticket {
    /// The event's sequence number, known once it is sequenced (even before it is durable).
    pub fn seq(&self) -> Option<u64> {
        match self {
            Ticket::Done(Ok(seq)) | Ticket::Pending { seq, .. } => Some(*seq),
            Ticket::Done(Err(_)) => None,
        }
    }

    /// Waits until the event is durable; its sequence number.
    pub fn settle(self) -> Result<u64, String> {
        match self {
            Ticket::Done(r) => r,
            Ticket::Pending { recorder, seq } => recorder
                .wait_written(seq)
                .map(|()| seq)
                .map_err(|e| e.to_string()),
        }
    }
}

/// `s` for a URL query value: unreserved characters kept, everything else `%XX`.
pub fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl Sink {
    /// The sequence numbers of the events matching `query` (the `afr query` language), at
    /// most `limit`: through `afr serve` (`GET /v1/events?query=`), or the store's index.
    pub fn find(&mut self, query: &str, limit: usize) -> Result<Vec<u64>, String> {
        match self {
            Sink::Direct(r) => {
                let q = afr_recorder::query::Query::parse(query).map_err(|e| e.to_string())?;
                let mut m = r.query(&q).map_err(|e| e.to_string())?.matches;
                m.truncate(limit);
                Ok(m)
            }
            Sink::Server(c) => {
                let target = format!("/v1/events?query={}&limit={limit}", url_encode(query));
                let r = c
                    .request("GET", &target, None, b"")
                    .map_err(|e| e.to_string())?;
                if r.status != 200 {
                    return Err(format!(
                        "afr serve answered {}: {}",
                        r.status,
                        r.error_message()
                    ));
                }
                Ok(r.body
                    .split(|b| *b == b'\n')
                    .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
                    .filter_map(|v| v["seq"].as_u64())
                    .collect())
            }
        }
    }

    /// The recorder's id (its anchoring address): what a signed approval names as `recorder`.
    pub fn recorder_id(&mut self) -> Result<afr_core::RecorderId, String> {
        match self {
            Sink::Direct(r) => Ok(r.recorder_id()),
            Sink::Server(c) => {
                let r = c
                    .request("GET", "/v1/status", None, b"")
                    .map_err(|e| e.to_string())?;
                let json = r.json();
                let mut id = [0u8; 20];
                json["recorder"]
                    .as_str()
                    .and_then(|s| s.strip_prefix("0x"))
                    .and_then(|h| hex::decode_to_slice(h, &mut id).ok())
                    .ok_or_else(|| {
                        format!("afr serve answered {} without a recorder id", r.status)
                    })?;
                Ok(id)
            }
        }
    }

    /// The server of `dir` if one answers, else the store opened directly.
    pub fn open(dir: &Path) -> Result<Sink, SinkError> {
        match Client::running(dir) {
            Some(c) => Ok(Sink::Server(c)),
            None => Ok(Sink::Direct(Arc::new(Recorder::open(
                dir,
                Config::default(),
            )?))),
        }
    }

    /// Where events go, for messages.
    pub fn describe(&self) -> &'static str {
        match self {
            Sink::Server(_) => "afr serve",
            Sink::Direct(_) => "the store (directly)",
        }
    }

    /// Hands `event` (a JSON object of `docs/event.schema.json`) to the recorder under
    /// `idempotency_key` (a second event under the same key is not recorded: the first one's
    /// number is returned). Through `afr serve` it is durable before this returns; in the
    /// store opened here it is sequenced now and durable once the ticket settles, so that
    /// events handed over together share one synced write.
    pub fn submit(&mut self, event: &Value, idempotency_key: &str) -> Result<Ticket, SinkError> {
        match self {
            Sink::Direct(r) => {
                let bytes =
                    serde_json::to_vec(event).map_err(|e| SinkError::Invalid(e.to_string()))?;
                let input = EventInput::from_json(&bytes, DEFAULT_MAX_EVENT_BYTES)
                    .map_err(|e| SinkError::Invalid(e.to_string()))?;
                let seq = r
                    .submit_idempotent(idempotency_key.as_bytes(), input)?
                    .receipt
                    .seq;
                Ok(Ticket::Pending {
                    recorder: r.clone(),
                    seq,
                })
            }
            Sink::Server(c) => {
                let mut body = event.clone();
                if let Value::Object(m) = &mut body {
                    m.insert("idempotency_key".into(), idempotency_key.into());
                }
                let bytes =
                    serde_json::to_vec(&body).map_err(|e| SinkError::Invalid(e.to_string()))?;
                let r = c.request("POST", "/v1/events", Some("application/json"), &bytes)?;
                let json = r.json();
                match json["receipts"][0]["seq"].as_u64() {
                    Some(seq) if r.status == 200 => Ok(Ticket::Done(Ok(seq))),
                    _ => Err(SinkError::Server {
                        status: r.status,
                        message: match json["errors"][0]["message"].as_str() {
                            Some(m) => format!("{}: {m}", json["errors"][0]["field"]),
                            None => r.error_message(),
                        },
                    }),
                }
            }
        }
    }
}
