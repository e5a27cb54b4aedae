//! The witness over HTTP/1.1 (keep-alive, as the spec recommends): the two routes, bounded
//! bodies and connections, loopback unless allowed otherwise, graceful shutdown.
//!
//! | request | answer |
//! |---|---|
//! | `POST /add-checkpoint`, body ≤ [`MAX_REQUEST`] | [`Witness::add_checkpoint`]; 413 for a larger body |
//! | `GET /<hex SHA-256(origin)>/checkpoint` | 200 the cosigned checkpoint, 404 never cosigned or unknown |
//! | another method on those paths | 405 with `Allow` |
//! | anything else | 404 |

use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::{
    Method, Request, Response, StatusCode,
    body::Incoming,
    header::{ALLOW, CONTENT_LENGTH, CONTENT_TYPE, HeaderValue},
    server::conn::http1,
};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::{
    net::TcpListener,
    sync::{Semaphore, watch},
    task::JoinSet,
};

use afr_tlog::witness::MAX_REQUEST;

use crate::{Answer, TEXT, Witness};

/// Most connections served at once.
pub const MAX_CONNECTIONS: usize = 256;
/// How long a client may take to send a request's headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request's body may take to arrive.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long shutdown waits for requests in flight.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the listener could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// A non-loopback address without `allow_remote`.
    #[error("{0} is not a loopback address; pass --allow-remote to listen on it")]
    NotLoopback(SocketAddr),
    /// Binding failed.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// Binds `addr` (loopback only unless `allow_remote`). Must run inside a tokio runtime.
pub fn bind(addr: SocketAddr, allow_remote: bool) -> Result<TcpListener, ListenError> {
    if !addr.ip().is_loopback() && !allow_remote {
        return Err(ListenError::NotLoopback(addr));
    }
    let bind_err = |source| ListenError::Bind { addr, source };
    let l = std::net::TcpListener::bind(addr).map_err(bind_err)?;
    l.set_nonblocking(true).map_err(bind_err)?;
    TcpListener::from_std(l).map_err(bind_err)
}

type Body = Full<Bytes>;

fn respond(a: Answer) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(a.body)));
    *r.status_mut() = StatusCode::from_u16(a.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(a.content_type));
    r
}

fn plain(status: u16, body: &str) -> Response<Body> {
    respond(Answer {
        status,
        content_type: TEXT,
        body: format!("{body}\n"),
    })
}

fn not_allowed(allow: &'static str) -> Response<Body> {
    let mut r = plain(405, "method not allowed");
    r.headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    r
}

fn too_large() -> Response<Body> {
    plain(413, &format!("the body is over {MAX_REQUEST} bytes"))
}

/// One request.
async fn handle(w: Arc<Witness>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let path = req.uri().path().to_owned();
    if path == "/add-checkpoint" {
        if req.method() != Method::POST {
            return Ok(not_allowed("POST"));
        }
        let declared = req
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > MAX_REQUEST as u64) {
            return Ok(too_large());
        }
        let read = Limited::new(req.into_body(), MAX_REQUEST).collect();
        let body = match tokio::time::timeout(BODY_TIMEOUT, read).await {
            Err(_) => return Ok(plain(408, "the body took too long")),
            Ok(Ok(b)) => b.to_bytes(),
            Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => return Ok(too_large()),
            Ok(Err(_)) => return Ok(plain(400, "the body could not be read")),
        };
        // Checks, a cosignature and an fsync: off the async workers.
        let answer = tokio::task::spawn_blocking(move || w.add_checkpoint(&body))
            .await
            .unwrap_or_else(|_| Answer {
                status: 500,
                content_type: TEXT,
                body: "internal error\n".into(),
            });
        return Ok(respond(answer));
    }
    let hash = path
        .strip_prefix('/')
        .and_then(|p| p.strip_suffix("/checkpoint"))
        .filter(|h| h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')));
    if let Some(hash) = hash {
        if req.method() != Method::GET && req.method() != Method::HEAD {
            return Ok(not_allowed("GET, HEAD"));
        }
        return Ok(match w.checkpoint(hash) {
            Some(note) => respond(Answer {
                status: 200,
                content_type: TEXT,
                body: note,
            }),
            None => plain(404, "no checkpoint of this origin was cosigned here"),
        });
    }
    Ok(plain(404, "not found"))
}

/// Serves `listener` until `shutdown` completes, then lets each connection finish its request
/// in flight (at most [`DRAIN_TIMEOUT`]).
pub async fn serve(
    witness: Arc<Witness>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) {
    let (stop_tx, stop) = watch::channel(false);
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut conns = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        while conns.try_join_next().is_some() {}
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
            () = &mut shutdown => break,
        };
        let stream = tokio::select! {
            a = listener.accept() => match a {
                Ok((s, _)) => s,
                Err(e) => {
                    eprintln!("afr witness serve: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let (w, mut stop) = (witness.clone(), stop.clone());
        conns.spawn(async move {
            let svc = hyper::service::service_fn(move |req| handle(w.clone(), req));
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .max_buf_size(MAX_REQUEST + 16 * 1024)
                .serve_connection(TokioIo::new(stream), svc);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = stop.changed() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
            drop(permit);
        });
    }
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, async {
        while conns.join_next().await.is_some() {}
    })
    .await;
    conns.abort_all();
}
