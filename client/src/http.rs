//! Request bodies read under bounds and a deadline; response bodies, whole or streamed from a
//! blocking task through a bounded channel.

use std::{
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use tokio::sync::mpsc;

/// Every response body.
pub type Body = BoxBody<Bytes, std::io::Error>;

/// A whole response body.
pub fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into()).map_err(|never| match never {}).boxed()
}

/// Why a request body was not read to its end.
#[derive(Debug)]
pub enum ReadError {
    /// A bound was exceeded: which one, and the bound.
    TooLarge(&'static str, usize),
    /// The body did not arrive before the deadline.
    Timeout,
    /// The connection failed.
    Io(String),
}

/// Reads a body of at most `max` bytes, all of it within `within`.
pub async fn read_all(
    mut body: Incoming,
    max: usize,
    within: Duration,
) -> Result<Bytes, ReadError> {
    let deadline = tokio::time::Instant::now() + within;
    let mut out = BytesMut::new();
    while let Some(frame) = next_frame(&mut body, deadline).await? {
        if out.len() + frame.len() > max {
            return Err(ReadError::TooLarge("request body", max));
        }
        out.extend_from_slice(&frame);
    }
    Ok(out.freeze())
}

/// Bounds of an NDJSON body.
#[derive(Debug, Clone, Copy)]
pub struct LineBounds {
    /// Longest line, without its newline.
    pub line: usize,
    /// Most lines.
    pub lines: usize,
    /// Most bytes in all.
    pub body: usize,
}

/// Reads an NDJSON body into its lines (without newlines; blank lines kept, so line numbers
/// count every line), refusing it as soon as a bound is exceeded, all of it within `within`.
pub async fn read_lines(
    mut body: Incoming,
    b: LineBounds,
    within: Duration,
) -> Result<Vec<Bytes>, ReadError> {
    let deadline = tokio::time::Instant::now() + within;
    let mut lines = Vec::new();
    let mut cur = BytesMut::new();
    let mut total = 0usize;
    while let Some(frame) = next_frame(&mut body, deadline).await? {
        total += frame.len();
        if total > b.body {
            return Err(ReadError::TooLarge("request body", b.body));
        }
        let mut rest = &frame[..];
        while let Some(i) = rest.iter().position(|&c| c == b'\n') {
            cur.extend_from_slice(&rest[..i]);
            rest = &rest[i + 1..];
            if cur.len() > b.line {
                return Err(ReadError::TooLarge("line", b.line));
            }
            lines.push(cur.split().freeze());
            if lines.len() > b.lines {
                return Err(ReadError::TooLarge("batch (lines)", b.lines));
            }
        }
        cur.extend_from_slice(rest);
        if cur.len() > b.line {
            return Err(ReadError::TooLarge("line", b.line));
        }
    }
    if !cur.is_empty() {
        lines.push(cur.freeze());
        if lines.len() > b.lines {
            return Err(ReadError::TooLarge("batch (lines)", b.lines));
        }
    }
    Ok(lines)
}

async fn next_frame(
    body: &mut Incoming,
    deadline: tokio::time::Instant,
) -> Result<Option<Bytes>, ReadError> {
    loop {
        match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_) => return Err(ReadError::Timeout),
            Ok(None) => return Ok(None),
            Ok(Some(Err(e))) => return Err(ReadError::Io(e.to_string())),
            Ok(Some(Ok(f))) => {
                if let Ok(d) = f.into_data() {
                    return Ok(Some(d));
                }
                // Trailers: nothing to read.
            }
        }
    }
}

/// A streamed response body fed by a channel (a [`ChannelWriter`] here; the MCP gateway's
/// SSE relay too).
#[derive(Debug)]
pub struct ChannelBody {
    rx: mpsc::Receiver<Result<Bytes, std::io::Error>>,
}

impl ChannelBody {
    /// A body that yields what `rx` receives, until every sender is gone.
    pub fn new(rx: mpsc::Receiver<Result<Bytes, std::io::Error>>) -> ChannelBody {
        ChannelBody { rx }
    }
}

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        self.rx.poll_recv(cx).map(|o| o.map(|r| r.map(Frame::data)))
    }
}

/// The blocking end of a streamed body: buffers up to [`CHUNK`] bytes, then waits for the
/// client to take them (the channel holds [`DEPTH`] chunks), so a slow reader slows the
/// producer instead of growing memory.
#[derive(Debug)]
pub struct ChannelWriter {
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
    buf: Vec<u8>,
}

/// Bytes per streamed chunk.
const CHUNK: usize = 64 * 1024;
/// Chunks in flight per streamed response.
const DEPTH: usize = 4;

/// A streamed body and its writer.
pub fn channel() -> (ChannelWriter, Body) {
    let (tx, rx) = mpsc::channel(DEPTH);
    (
        ChannelWriter {
            tx,
            buf: Vec::with_capacity(CHUNK),
        },
        BodyExt::boxed(ChannelBody { rx }),
    )
}

impl ChannelWriter {
    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        self.tx
            .blocking_send(Ok(chunk))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "client went away"))
    }

    /// Ends the body with an error: the client sees a truncated response, never a short one
    /// that looks complete.
    pub fn fail(self, message: String) {
        let _ = self.tx.blocking_send(Err(std::io::Error::other(message)));
    }
}

impl std::io::Write for ChannelWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(b);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}
