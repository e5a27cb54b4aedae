//! Server-sent events as the proxy reads and writes them: cut a stream at its blank lines, read
//! one event's JSON, write a JSON message as an event.

use bytes::Bytes;
use hyper::{HeaderMap, header};
use serde_json::{Map, Value};

/// One SSE event's data, as JSON, if it is a JSON object.
pub(super) fn sse_message(event: &[u8]) -> Option<Map<String, Value>> {
    let text = std::str::from_utf8(event).ok()?;
    let mut data = String::new();
    for line in text.lines() {
        if let Some(d) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(d.strip_prefix(' ').unwrap_or(d));
        }
    }
    match serde_json::from_str(&data).ok()? {
        Value::Object(m) => Some(m),
        _ => None,
    }
}

/// The end (exclusive) of the first complete SSE event in `buf`, blank line included.
pub(super) fn event_end(buf: &[u8]) -> Option<usize> {
    let mut i = 0;
    while i < buf.len() {
        // A line ends with \n, \r\n or \r; an empty line ends the event.
        let rest = &buf[i..];
        let (line_end, next) = match rest.iter().position(|b| *b == b'\n' || *b == b'\r') {
            Some(p) if rest[p] == b'\r' && rest.get(p + 1) == Some(&b'\n') => (p, p + 2),
            Some(p) if rest[p] == b'\r' && p + 1 == rest.len() => return None, // maybe \r\n
            Some(p) => (p, p + 1),
            None => return None,
        };
        if line_end == 0 && i > 0 {
            return Some(i + next);
        }
        if line_end == 0 {
            // A leading blank line: an empty event; pass it on alone.
            return Some(next);
        }
        i += next;
    }
    None
}

/// An SSE event carrying `msg` (multi-line JSON gets one `data:` per line).
pub(super) fn sse_event(msg: &[u8]) -> Bytes {
    let text = String::from_utf8_lossy(msg);
    let mut out = String::from("event: message\n");
    for line in text.lines() {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    Bytes::from(out)
}

pub(super) fn is_sse(h: &HeaderMap) -> bool {
    h.get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn sse_events_are_cut_at_blank_lines() {
        let buf = b"event: message\ndata: {\"id\":1}\n\nid: 2\r\ndata: {\"a\":\r\ndata: 2}\r\n\r\npartial";
        let end = event_end(buf).unwrap();
        assert_eq!(&buf[..end], b"event: message\ndata: {\"id\":1}\n\n");
        assert_eq!(sse_message(&buf[..end]).unwrap()["id"], 1);
        let rest = &buf[end..];
        let end2 = event_end(rest).unwrap();
        assert_eq!(sse_message(&rest[..end2]).unwrap()["a"], 2);
        assert_eq!(event_end(&rest[end2..]), None);
        assert_eq!(event_end(b"data: x\r"), None);
        let e = sse_event(b"{\n\"a\": 1\n}");
        assert_eq!(sse_message(&e).unwrap()["a"], 1);
    }
}
