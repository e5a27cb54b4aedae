//! A small blocking HTTP/1.1 client over the server's Unix socket, for the CLI.
//!
//! Just what the CLI needs: one request at a time on a kept-alive connection, bodies sized by
//! `Content-Length` or chunked, and a streamed body for exports and query answers.
//!
//! ```no_run
//! # fn main() -> Result<(), afr_client::socket::ClientError> {
//! if let Some(mut c) = afr_client::socket::Client::running(std::path::Path::new(".afr")) {
//!     let r = c.request("GET", "/v1/status", None, b"")?;
//!     println!("{}", String::from_utf8_lossy(&r.body));
//! }
//! # Ok(())
//! # }
//! ```

use std::{
    io::{BufRead, BufReader, Read, Write},
    os::unix::net::UnixStream,
    path::{Path, PathBuf},
};

use crate::SOCKET_FILE;

/// Longest status line or header line accepted.
const MAX_LINE: usize = 16 * 1024;
/// Most header lines accepted.
const MAX_HEADERS: usize = 100;

/// Errors of the client.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The socket failed.
    #[error("server at {path}: {source}")]
    Io {
        /// The socket.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// The server answered something that is not HTTP/1.1 as this client reads it.
    #[error("server at {path}: malformed response: {message}")]
    Protocol {
        /// The socket.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// A whole response.
#[derive(Debug, Clone)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Header names (lower case) and values, in order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }

    /// The body as JSON (`Null` if it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// The `error` member of a JSON error body, else the body as text.
    pub fn error_message(&self) -> String {
        match self.json()["error"].as_str() {
            Some(m) => m.to_owned(),
            None => String::from_utf8_lossy(&self.body).trim().to_owned(),
        }
    }
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// A response whose body is read as it arrives.
#[derive(Debug)]
pub struct StreamResponse {
    /// Status code.
    pub status: u16,
    /// Header names (lower case) and values, in order.
    pub headers: Vec<(String, String)>,
    body: BodyReader,
}

impl StreamResponse {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }
}

impl Read for StreamResponse {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.body.read(buf)
    }
}

/// A connection to `afr serve`.
#[derive(Debug)]
pub struct Client {
    path: PathBuf,
    conn: Option<BufReader<UnixStream>>,
}

impl Client {
    /// A client of the server of recorder directory `dir`, if its socket exists and a server
    /// accepts on it (a stale socket is not a server).
    pub fn running(dir: &Path) -> Option<Client> {
        let path = dir.join(SOCKET_FILE);
        let s = UnixStream::connect(&path).ok()?;
        Some(Client {
            path,
            conn: Some(BufReader::new(s)),
        })
    }

    /// A client of the server listening on `socket`.
    pub fn connect(socket: &Path) -> Result<Client, ClientError> {
        let s = UnixStream::connect(socket).map_err(|source| ClientError::Io {
            path: socket.to_owned(),
            source,
        })?;
        Ok(Client {
            path: socket.to_owned(),
            conn: Some(BufReader::new(s)),
        })
    }

    /// Another connection to the same server.
    pub fn another(&self) -> Result<Client, ClientError> {
        Client::connect(&self.path)
    }

    fn io(&self) -> impl Fn(std::io::Error) -> ClientError + '_ {
        |source| ClientError::Io {
            path: self.path.clone(),
            source,
        }
    }

    fn protocol(&self, message: impl Into<String>) -> ClientError {
        ClientError::Protocol {
            path: self.path.clone(),
            message: message.into(),
        }
    }

    /// Sends a request and reads the whole response. `content_type` and `body` go together
    /// (`None` sends no body).
    pub fn request(
        &mut self,
        method: &str,
        target: &str,
        content_type: Option<&str>,
        body: &[u8],
    ) -> Result<Response, ClientError> {
        let (status, headers, mut reader) =
            self.exchange(method, target, content_type, body, true)?;
        let mut out = Vec::new();
        reader.read_to_end(&mut out).map_err(self.io())?;
        if reader.reusable() && !close_requested(&headers) {
            self.conn = Some(reader.into_inner());
        }
        Ok(Response {
            status,
            headers,
            body: out,
        })
    }

    /// Sends a request and returns the response with its body still to be read; the
    /// connection is closed afterwards.
    pub fn request_stream(
        mut self,
        method: &str,
        target: &str,
        content_type: Option<&str>,
        body: &[u8],
    ) -> Result<StreamResponse, ClientError> {
        let (status, headers, body) = self.exchange(method, target, content_type, body, false)?;
        Ok(StreamResponse {
            status,
            headers,
            body,
        })
    }

    fn exchange(
        &mut self,
        method: &str,
        target: &str,
        content_type: Option<&str>,
        body: &[u8],
        keep_alive: bool,
    ) -> Result<Head, ClientError> {
        let mut head = format!("{method} {target} HTTP/1.1\r\nHost: afr\r\n");
        if let Some(ct) = content_type {
            head += &format!("Content-Type: {ct}\r\nContent-Length: {}\r\n", body.len());
        } else if method == "POST" {
            head += "Content-Length: 0\r\n";
        }
        if !keep_alive {
            head += "Connection: close\r\n";
        }
        head += "\r\n";
        // A kept-alive connection the server has since closed fails before any byte of the
        // answer: the server never read the request, so it is sent once more on a new one.
        for attempt in 0..2 {
            let reused = self.conn.is_some();
            let mut conn = match self.conn.take() {
                Some(c) => c,
                None => BufReader::new(UnixStream::connect(&self.path).map_err(self.io())?),
            };
            let sent = conn
                .get_mut()
                .write_all(head.as_bytes())
                .and_then(|()| conn.get_mut().write_all(body))
                .and_then(|()| conn.get_mut().flush());
            // A server that refuses a request early (503, 413) answers before reading the body
            // and closes: the write then fails, but its answer is there to be read.
            let answered = match sent {
                Ok(()) => read_line(&mut conn),
                Err(e) => match read_line(&mut conn) {
                    Ok(l) if !l.is_empty() => Ok(l),
                    _ => Err(e),
                },
            };
            let status_line = match answered {
                Ok(l) if !l.is_empty() => l,
                Ok(_) | Err(_) if reused && attempt == 0 => continue,
                Ok(_) => return Err(self.protocol("the server closed the connection")),
                Err(e) => return Err(self.io()(e)),
            };
            return self.read_head(conn, &status_line, method == "HEAD");
        }
        Err(self.protocol("the server closed the connection"))
    }

    fn read_head(
        &self,
        mut conn: BufReader<UnixStream>,
        status_line: &str,
        head_only: bool,
    ) -> Result<Head, ClientError> {
        let mut parts = status_line.splitn(3, ' ');
        let (Some(version), Some(code)) = (parts.next(), parts.next()) else {
            return Err(self.protocol("no status line"));
        };
        if !version.starts_with("HTTP/1.") {
            return Err(self.protocol("not HTTP/1.x"));
        }
        let status: u16 = code.parse().map_err(|_| self.protocol("bad status code"))?;
        let mut headers = Vec::new();
        loop {
            let line = read_line(&mut conn).map_err(self.io())?;
            if line.is_empty() {
                break;
            }
            if headers.len() >= MAX_HEADERS {
                return Err(self.protocol("too many headers"));
            }
            let (k, v) = line
                .split_once(':')
                .ok_or_else(|| self.protocol("bad header line"))?;
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
        let kind = if head_only || status == 204 || status == 304 {
            Kind::Length(0)
        } else if header(&headers, "transfer-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
        {
            Kind::Chunked {
                left: 0,
                done: false,
            }
        } else if let Some(n) = header(&headers, "content-length") {
            Kind::Length(n.parse().map_err(|_| self.protocol("bad Content-Length"))?)
        } else {
            Kind::Eof
        };
        Ok((status, headers, BodyReader { conn, kind }))
    }
}

fn close_requested(headers: &[(String, String)]) -> bool {
    header(headers, "connection").is_some_and(|v| v.eq_ignore_ascii_case("close"))
}

/// One CRLF-terminated line without its terminator; empty at end of stream.
fn read_line(r: &mut impl BufRead) -> std::io::Result<String> {
    let mut buf = Vec::new();
    r.by_ref()
        .take(MAX_LINE as u64)
        .read_until(b'\n', &mut buf)?;
    if !buf.is_empty() && !buf.ends_with(b"\n") {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "line too long or cut short",
        ));
    }
    while buf.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        buf.pop();
    }
    String::from_utf8(buf)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8"))
}

/// A response's status, headers, and its body still to be read.
type Head = (u16, Vec<(String, String)>, BodyReader);

#[derive(Debug)]
enum Kind {
    Length(u64),
    Chunked { left: u64, done: bool },
    Eof,
}

/// A response body: `Content-Length`, chunked, or up to the end of the connection.
#[derive(Debug)]
struct BodyReader {
    conn: BufReader<UnixStream>,
    kind: Kind,
}

impl BodyReader {
    fn reusable(&self) -> bool {
        matches!(
            self.kind,
            Kind::Length(0) | Kind::Chunked { done: true, .. }
        )
    }

    fn into_inner(self) -> BufReader<UnixStream> {
        self.conn
    }
}

fn bad(m: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_owned())
}

impl Read for BodyReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match &mut self.kind {
            Kind::Eof => self.conn.read(buf),
            Kind::Length(left) => {
                if *left == 0 || buf.is_empty() {
                    return Ok(0);
                }
                let n = (*left).min(buf.len() as u64) as usize;
                let got = self.conn.read(&mut buf[..n])?;
                if got == 0 {
                    return Err(bad("the response body was cut short"));
                }
                *left -= got as u64;
                Ok(got)
            }
            Kind::Chunked { left, done } => {
                if *done || buf.is_empty() {
                    return Ok(0);
                }
                if *left == 0 {
                    let line = read_line(&mut self.conn)?;
                    if line.is_empty() {
                        return Err(bad("the response body was cut short"));
                    }
                    let size = line.split(';').next().unwrap_or_default().trim();
                    let size = u64::from_str_radix(size, 16).map_err(|_| bad("bad chunk size"))?;
                    if size == 0 {
                        // Trailers, then the blank line that ends the body.
                        while !read_line(&mut self.conn)?.is_empty() {}
                        *done = true;
                        return Ok(0);
                    }
                    *left = size;
                }
                let n = (*left).min(buf.len() as u64) as usize;
                let got = self.conn.read(&mut buf[..n])?;
                if got == 0 {
                    return Err(bad("the response body was cut short"));
                }
                *left -= got as u64;
                if *left == 0 && !read_line(&mut self.conn)?.is_empty() {
                    return Err(bad("chunk not followed by CRLF"));
                }
                Ok(got)
            }
        }
    }
}
