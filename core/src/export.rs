//! The whole-log export: one file a verifier checks on its own.
//!
//! The file is a CBOR sequence (RFC 8742) of canonical items ("frames"):
//!
//! ```text
//! ["afr-log", 1, recorder: bstr(20), exported_at_us: uint]          start
//! ["epoch", header]                                                  a sealed epoch header,
//! ["event", record, sealed_payload / null]  × header.count           then its events
//! ...
//! ["tail", n: uint]                                                  events not yet sealed
//! ["event", record, sealed_payload / null]  × n
//! ["end", events: uint, epochs: uint]                                end (detects truncation)
//! ```
//!
//! `record`, `header` and `sealed_payload` are the exact canonical items of
//! [`crate::Record`], [`crate::EpochHeader`] and [`crate::crypto::EncryptedPayload`], inline, so
//! a verifier hashes a record's bytes straight from the file. A payload is `null` when it was
//! withheld. The reader borrows from the input and never allocates by a declared length.

use crate::{
    EpochHeader, FORMAT_VERSION, Record, RecorderId,
    cbor::{CborError, Reader, Writer},
    crypto::EncryptedPayload,
};

/// Magic of the start frame.
pub const LOG_MAGIC: &str = "afr-log";

/// One frame of an export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame<'a> {
    /// The start frame.
    Start {
        /// Recorder whose log this is.
        recorder: RecorderId,
        /// When it was exported.
        exported_at_us: u64,
    },
    /// A sealed epoch header; its events follow.
    Epoch(EpochHeader),
    /// Start of the unsealed tail and how many events it holds.
    Tail(u64),
    /// One event.
    Event {
        /// The record's canonical bytes, as found in the file.
        record_bytes: &'a [u8],
        /// The parsed record.
        record: Record,
        /// The sealed payload, unless withheld.
        payload: Option<EncryptedPayload>,
    },
    /// The end frame with the totals.
    End {
        /// Events in the file.
        events: u64,
        /// Sealed epochs in the file.
        epochs: u64,
    },
}

/// Writes export frames.
#[derive(Debug, Default)]
pub struct LogWriter {
    w: Writer,
}

impl LogWriter {
    /// The start frame.
    pub fn start(recorder: &RecorderId, exported_at_us: u64) -> LogWriter {
        let mut w = Writer::with_capacity(1 << 16);
        w.array(4);
        w.text(LOG_MAGIC);
        w.uint(FORMAT_VERSION);
        w.bytes(recorder);
        w.uint(exported_at_us);
        LogWriter { w }
    }

    /// An epoch header frame.
    pub fn epoch(&mut self, header_bytes: &[u8]) {
        self.w.array(2);
        self.w.text("epoch");
        self.w.raw(header_bytes);
    }

    /// The tail frame.
    pub fn tail(&mut self, n: u64) {
        self.w.array(2);
        self.w.text("tail");
        self.w.uint(n);
    }

    /// An event frame from stored canonical bytes.
    pub fn event(&mut self, record_bytes: &[u8], payload_bytes: Option<&[u8]>) {
        self.w.array(3);
        self.w.text("event");
        self.w.raw(record_bytes);
        match payload_bytes {
            Some(p) => self.w.raw(p),
            None => self.w.null(),
        }
    }

    /// The end frame.
    pub fn end(&mut self, events: u64, epochs: u64) {
        self.w.array(3);
        self.w.text("end");
        self.w.uint(events);
        self.w.uint(epochs);
    }

    /// Takes the bytes written so far (the writer can go on).
    pub fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.w.buf)
    }
}

/// Reads export frames from a byte slice.
#[derive(Debug)]
pub struct LogReader<'a> {
    r: Reader<'a>,
    buf: &'a [u8],
}

impl<'a> LogReader<'a> {
    /// A reader over a whole export file.
    pub fn new(buf: &'a [u8]) -> LogReader<'a> {
        LogReader {
            r: Reader::new(buf),
            buf,
        }
    }

    /// Whether every byte has been read.
    pub fn at_end(&self) -> bool {
        self.r.position() == self.buf.len()
    }

    /// Byte offset of the next frame, for error messages.
    pub fn offset(&self) -> usize {
        self.r.position()
    }

    /// The next frame; `Ok(None)` at the end of input.
    pub fn next_frame(&mut self) -> Result<Option<Frame<'a>>, CborError> {
        if self.at_end() {
            return Ok(None);
        }
        let n = self.r.array()?;
        let tag = self.r.text()?;
        let f = match (tag, n) {
            (LOG_MAGIC, 4) => {
                let v = self.r.uint()?;
                if v != FORMAT_VERSION {
                    return Err(CborError::Malformed(format!(
                        "export version {v} unsupported"
                    )));
                }
                Frame::Start {
                    recorder: self.r.fixed()?,
                    exported_at_us: self.r.uint()?,
                }
            }
            ("epoch", 2) => Frame::Epoch(EpochHeader::read(&mut self.r)?),
            ("tail", 2) => Frame::Tail(self.r.uint()?),
            ("event", 3) => {
                let start = self.r.position();
                skip_record(&mut self.r)?;
                let record_bytes = self
                    .buf
                    .get(start..self.r.position())
                    .ok_or(CborError::Truncated)?;
                let record = Record::decode(record_bytes)?;
                let payload = if self.r.null()? {
                    None
                } else {
                    Some(EncryptedPayload::read(&mut self.r)?)
                };
                Frame::Event {
                    record_bytes,
                    record,
                    payload,
                }
            }
            ("end", 3) => Frame::End {
                events: self.r.uint()?,
                epochs: self.r.uint()?,
            },
            (t, n) => {
                return Err(CborError::Malformed(format!(
                    "unknown frame `{t}` with {n} items"
                )));
            }
        };
        Ok(Some(f))
    }
}

/// A source of export frames: a whole file in memory ([`LogReader`]) or a stream
/// ([`StreamLog`]). A frame borrows from the source until the next call.
pub trait Frames {
    /// The next frame; `Ok(None)` at the end of input.
    fn next_frame(&mut self) -> Result<Option<Frame<'_>>, CborError>;
    /// Byte offset of the next frame, for error messages.
    fn offset(&self) -> u64;
    /// Whether every byte has been read.
    fn at_end(&mut self) -> bool;
}

impl Frames for LogReader<'_> {
    fn next_frame(&mut self) -> Result<Option<Frame<'_>>, CborError> {
        LogReader::next_frame(self)
    }
    fn offset(&self) -> u64 {
        LogReader::offset(self) as u64
    }
    fn at_end(&mut self) -> bool {
        LogReader::at_end(self)
    }
}

/// Largest frame a [`StreamLog`] buffers: a recorder's events are capped far below it (1 MiB
/// by default, sealed and with their record).
pub const MAX_STREAM_FRAME: usize = 64 << 20;

/// Reads export frames from a stream, holding one frame (and a read-ahead chunk) at a time:
/// memory stays bounded whatever the size of the log.
#[derive(Debug)]
pub struct StreamLog<R> {
    src: R,
    buf: Vec<u8>,
    /// Start of the unread bytes in `buf`.
    start: usize,
    /// Length of the frame last returned (consumed at the next call).
    pending: usize,
    /// File offset of `buf[0]`.
    base: u64,
    chunk: usize,
    eof: bool,
    /// The read error that ended the stream, if any (the frames then look truncated).
    pub io_error: Option<std::io::Error>,
}

impl<R: std::io::Read> StreamLog<R> {
    /// A reader of `src`, reading 1 MiB at a time.
    pub fn new(src: R) -> StreamLog<R> {
        StreamLog::with_chunk(src, 1 << 20)
    }

    /// A reader of `src` reading `chunk` bytes at a time (small chunks test the boundaries).
    pub fn with_chunk(src: R, chunk: usize) -> StreamLog<R> {
        StreamLog {
            src,
            buf: Vec::new(),
            start: 0,
            pending: 0,
            base: 0,
            chunk: chunk.max(1),
            eof: false,
            io_error: None,
        }
    }

    /// Reads one more chunk after the unread bytes (dropping the read ones first).
    fn fill(&mut self) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.base += self.start as u64;
            self.start = 0;
        }
        let old = self.buf.len();
        self.buf.resize(old + self.chunk, 0);
        loop {
            let got = match self.buf.get_mut(old..) {
                Some(free) => self.src.read(free),
                // `buf` was just resized past `old`.
                None => Ok(0),
            };
            match got {
                Ok(n) => {
                    self.buf.truncate(old + n);
                    self.eof = n == 0;
                    return;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.buf.truncate(old);
                    self.eof = true;
                    self.io_error = Some(e);
                    return;
                }
            }
        }
    }
}

impl<R: std::io::Read> Frames for StreamLog<R> {
    fn next_frame(&mut self) -> Result<Option<Frame<'_>>, CborError> {
        self.start += std::mem::take(&mut self.pending);
        let len = loop {
            let avail = self.buf.len() - self.start;
            if avail == 0 && self.eof {
                return Ok(None);
            }
            // `start` never passes the end of `buf`.
            match crate::cbor::item_len(self.buf.get(self.start..).unwrap_or_default()) {
                Ok(n) => break n,
                Err(CborError::Truncated) if !self.eof => {
                    if avail > MAX_STREAM_FRAME {
                        return Err(CborError::Malformed(format!(
                            "a frame longer than {MAX_STREAM_FRAME} bytes"
                        )));
                    }
                    self.fill();
                }
                Err(e) => return Err(e),
            }
        };
        self.pending = len;
        let frame = self
            .buf
            .get(self.start..)
            .and_then(|rest| rest.get(..len))
            .ok_or(CborError::Truncated)?;
        let mut r = LogReader::new(frame);
        r.next_frame()
    }

    fn offset(&self) -> u64 {
        self.base + (self.start + self.pending) as u64
    }

    fn at_end(&mut self) -> bool {
        self.start += std::mem::take(&mut self.pending);
        while self.buf.len() == self.start && !self.eof {
            self.fill();
        }
        self.buf.len() == self.start
    }
}

/// Advances past one record item (a 10-item array) without interpreting it; `Record::decode`
/// then checks it strictly.
pub(crate) fn skip_record(r: &mut Reader<'_>) -> Result<(), CborError> {
    r.array_of(10, "record")?;
    r.uint()?; // version
    r.bytes()?; // recorder
    r.uint()?;
    r.uint()?;
    r.uint()?;
    r.uint()?; // seq, epoch, timestamp, category
    if !r.null()? {
        r.text()?;
    }
    let n = r.array()?;
    if n > crate::record::MAX_CONCURRENT as u64 {
        return Err(CborError::Malformed("too many concurrent events".into()));
    }
    for _ in 0..n {
        r.uint()?;
    }
    r.bytes()?;
    r.bytes()?;
    Ok(())
}
