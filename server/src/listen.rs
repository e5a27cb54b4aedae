//! Sockets: the private Unix socket, the optional TCP listener, and the accept loop that
//! serves connections until shutdown and then drains them.

use std::{
    net::SocketAddr,
    os::unix::fs::{FileTypeExt, PermissionsExt},
    path::Path,
    sync::Arc,
};

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    sync::{Semaphore, watch},
    task::JoinSet,
};
use zeroize::Zeroizing;

use crate::{AppState, ServeError, api};

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ServeError {
    let what = what.into();
    move |source| ServeError::Io { what, source }
}

/// Binds `path` with mode 0600. The socket is created in a fresh 0700 directory beside it,
/// made 0600 there, then renamed into place, so no other user can connect in between. An
/// existing socket is replaced only if nothing answers on it.
pub(crate) fn unix(path: &Path) -> Result<tokio::net::UnixListener, ServeError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if !m.file_type().is_socket() => {
            return Err(ServeError::NotASocket(path.to_owned()));
        }
        Ok(_) => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(ServeError::AlreadyRunning(path.to_owned()));
            }
            std::fs::remove_file(path)
                .map_err(io(format!("remove the stale socket {}", path.display())))?;
        }
        Err(_) => {}
    }
    let parent = path.parent().unwrap_or(Path::new("."));
    let staging = tempfile::Builder::new()
        .prefix(".afr-sock-")
        .tempdir_in(parent)
        .map_err(io(format!("create a directory in {}", parent.display())))?;
    let tmp = staging.path().join("s");
    let l = std::os::unix::net::UnixListener::bind(&tmp)
        .map_err(io(format!("bind {}", tmp.display())))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
        .map_err(io(format!("chmod {}", tmp.display())))?;
    std::fs::rename(&tmp, path).map_err(io(format!("move the socket to {}", path.display())))?;
    l.set_nonblocking(true)
        .map_err(io("make the socket non-blocking"))?;
    tokio::net::UnixListener::from_std(l).map_err(io("register the socket"))
}

/// Binds a TCP listener.
pub(crate) fn tcp(addr: SocketAddr) -> Result<tokio::net::TcpListener, ServeError> {
    let l = std::net::TcpListener::bind(addr).map_err(io(format!("bind {addr}")))?;
    l.set_nonblocking(true)
        .map_err(io("make the socket non-blocking"))?;
    tokio::net::TcpListener::from_std(l).map_err(io("register the socket"))
}

/// A listener of either kind.
pub(crate) enum Acceptor {
    Unix(tokio::net::UnixListener),
    Tcp(tokio::net::TcpListener),
}

/// Serves connections until `stop` turns true, then stops accepting, asks each connection to
/// finish its request in flight and close, and waits for them (at most the drain timeout).
pub(crate) async fn accept_loop(
    acceptor: Acceptor,
    state: Arc<AppState>,
    token: Option<Arc<Zeroizing<Vec<u8>>>>,
    mut stop: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(state.limits.max_connections.max(1)));
    let mut conns = JoinSet::new();
    loop {
        while conns.try_join_next().is_some() {}
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
            _ = stop.changed() => break,
        };
        let accepted = tokio::select! {
            a = accept(&acceptor) => a,
            _ = stop.changed() => break,
        };
        let stream = match accepted {
            Ok(s) => s,
            Err(e) => {
                // Out of file descriptors and the like: wait a moment rather than spin.
                eprintln!("afr serve: accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let (state, token, stop) = (state.clone(), token.clone(), stop.clone());
        state
            .connections
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        conns.spawn(async move {
            let open = state.clone();
            match stream {
                Stream::Unix(s) => serve_conn(s, state, token, stop).await,
                Stream::Tcp(s) => {
                    let _ = s.set_nodelay(true);
                    serve_conn(s, state, token, stop).await
                }
            }
            open.connections
                .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            drop(permit);
        });
    }
    let drain = state.limits.drain_timeout;
    let _ = tokio::time::timeout(drain, async { while conns.join_next().await.is_some() {} }).await;
    conns.abort_all();
}

enum Stream {
    Unix(tokio::net::UnixStream),
    Tcp(tokio::net::TcpStream),
}

async fn accept(a: &Acceptor) -> std::io::Result<Stream> {
    match a {
        Acceptor::Unix(l) => l.accept().await.map(|(s, _)| Stream::Unix(s)),
        Acceptor::Tcp(l) => l.accept().await.map(|(s, _)| Stream::Tcp(s)),
    }
}

async fn serve_conn<S>(
    stream: S,
    state: Arc<AppState>,
    token: Option<Arc<Zeroizing<Vec<u8>>>>,
    mut stop: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let header_timeout = state.limits.header_timeout;
    let svc = hyper::service::service_fn(move |req| api::handle(state.clone(), token.clone(), req));
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .max_buf_size(64 * 1024)
        .serve_connection(TokioIo::new(stream), svc);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = stop.changed() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}
