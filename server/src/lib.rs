//! `afr serve`: one long-running recorder that live agents, proxies and the CLI talk to.
//!
//! The server is a thin shell over [`afr_recorder::Recorder`]: a handler parses a request,
//! calls the same `Recorder` API `afr record` uses, and maps typed errors to status codes in
//! one place ([`api`]). The API is HTTP/1.1, versioned under `/v1`, and specified in
//! `docs/api.md` and `docs/openapi.yaml`.
//!
//! ```text
//!  agents, proxies ──HTTP/1.1──► <dir>/afr.sock (0600)   ┐
//!  afr record/status/…          127.0.0.1:PORT + bearer ┴► api ──► spawn_blocking ──► Recorder
//!                                                               ▲                      │ store
//!                               anchor task (timer, on seal) ───┘ afr_anchorer::anchor_pass
//! ```
//!
//! # Contract
//!
//! - A receipt MUST NOT be sent before its event is durable under the recorder's
//!   [`afr_recorder::Durability`] (`group`: the batch is submitted, then the server waits for
//!   the write of its last event).
//! - Every request body, line and batch is bounded ([`Limits`]); a request that exceeds a
//!   bound is refused (413) before more of it is read, and nothing of it is recorded.
//! - At most [`Limits::max_inflight`] ingest requests are processed at once; the next one is
//!   answered 503 with `Retry-After` before its body is read.
//! - Anchoring runs in its own task and MUST NOT block or fail ingest.
//! - On SIGTERM or SIGINT the server stops accepting, lets in-flight requests finish (up to
//!   [`Limits::drain_timeout`]), flushes the recorder and returns; the open epoch stays open.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use afr_recorder::Recorder;
use tokio::sync::{Semaphore, watch};
use zeroize::Zeroizing;

mod anchor;
mod api;
mod ingest;
mod listen;
pub mod status;

pub use anchor::{AnchorConfig, PassResult};
pub use ingest::{LINE_SLACK as MAX_LINE_SLACK, split_key as split_idempotency_key};

pub use afr_client::SOCKET_FILE;

/// Errors that stop the server from starting or running.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Another server answers on the socket.
    #[error("a server is already listening on {}", .0.display())]
    AlreadyRunning(PathBuf),
    /// Something that is not a socket is in the way.
    #[error("{} exists and is not a socket; remove it", .0.display())]
    NotASocket(PathBuf),
    /// A TCP address that is not loopback, without `--allow-remote` and a token.
    #[error(
        "{0} is not a loopback address: pass --allow-remote (and a --token-file) to listen on it"
    )]
    NotLoopback(SocketAddr),
    /// TCP without a token.
    #[error("listening on TCP needs a bearer token (--token-file, mode 0600)")]
    NoToken,
    /// The token file is unusable.
    #[error("token file {path}: {message}")]
    TokenFile {
        /// Which file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The operating system refused something (bind, chmod, rename, the runtime).
    #[error("cannot {what}: {source}")]
    Io {
        /// What was attempted.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The recorder failed while shutting down.
    #[error(transparent)]
    Record(#[from] afr_recorder::RecordError),
}

/// Bounds on what one client may make the server hold.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Most event lines in one `POST /v1/events`.
    pub max_batch_lines: usize,
    /// Most bytes in one request body.
    pub max_body_bytes: usize,
    /// Ingest requests processed at once; more are answered 503.
    pub max_inflight: usize,
    /// Open connections per listener; more wait in the kernel's backlog.
    pub max_connections: usize,
    /// Time a client has to send a request's headers.
    pub header_timeout: Duration,
    /// Time a client has to send a request's body, and most time between two of its reads.
    pub body_timeout: Duration,
    /// How long shutdown waits for in-flight requests.
    pub drain_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_batch_lines: 1_000,
            max_body_bytes: 16 << 20,
            max_inflight: 16,
            max_connections: 256,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            drain_timeout: Duration::from_secs(30),
        }
    }
}

/// A TCP listener and the bearer token it requires.
pub struct TcpConfig {
    /// Address to bind.
    pub addr: SocketAddr,
    /// The token clients send as `Authorization: Bearer <token>`.
    pub token: Zeroizing<Vec<u8>>,
    /// Allow a non-loopback address.
    pub allow_remote: bool,
}

impl std::fmt::Debug for TcpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpConfig")
            .field("addr", &self.addr)
            .field("allow_remote", &self.allow_remote)
            .finish_non_exhaustive()
    }
}

/// Everything `afr serve` is told.
#[derive(Debug)]
pub struct ServerConfig {
    /// The recorder directory (the socket goes in it; exports open it read-only).
    pub dir: PathBuf,
    /// The optional TCP listener.
    pub tcp: Option<TcpConfig>,
    /// Bounds.
    pub limits: Limits,
    /// Anchoring inside the server.
    pub anchor: Option<AnchorConfig>,
    /// Signs delegation receipts with the recorder's anchoring key (`/v1/delegations/*`);
    /// without it those routes answer 503.
    pub receipt_signer: Option<ReceiptSigner>,
    /// A server a producer started on demand (`afr serve --on-demand`, see
    /// [`afr_client::Door::producer`]): it stops once no client has been connected for this
    /// long, and hands the store over (`POST /v1/handover`) to a long-running `afr serve`.
    pub on_demand: Option<Duration>,
    /// Runs coding-agent hooks handed over by their thin client (`POST /v1/hook`, see
    /// `afr_hook::remote`); without it that route answers 404 and the client runs `afr hook`
    /// itself.
    pub hooks: Option<HookHandler>,
}

/// Runs one hook request (its body) on the recorder of the directory: the answer's JSON body,
/// or why the request cannot be read.
pub type HookFn =
    dyn Fn(&std::path::Path, Arc<Recorder>, &[u8]) -> Result<Vec<u8>, String> + Send + Sync;

/// The server's hook runner.
#[derive(Clone)]
pub struct HookHandler(pub Arc<HookFn>);

impl std::fmt::Debug for HookHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HookHandler(..)")
    }
}

/// A function signing a 32-byte digest: `r ‖ s ‖ v`, or why not.
pub type SignDigest = dyn Fn(&[u8; 32]) -> Result<[u8; 65], String> + Send + Sync;

/// Signs a 32-byte digest with the recorder's anchoring key: `r ‖ s ‖ v`.
#[derive(Clone)]
pub struct ReceiptSigner(pub Arc<SignDigest>);

impl std::fmt::Debug for ReceiptSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReceiptSigner(..)")
    }
}

/// Where a running server listens; returned by [`Server::bind`].
#[derive(Debug, Clone)]
pub struct Bound {
    /// The Unix socket.
    pub socket: PathBuf,
    /// The TCP address actually bound (port 0 resolved).
    pub tcp: Option<SocketAddr>,
}

/// Counters the server exports in `/metrics` besides the store's figures.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) busy: AtomicU64,
    pub(crate) rejected_lines: AtomicU64,
    pub(crate) anchor_failures: AtomicU64,
    pub(crate) anchor_passes: AtomicU64,
}

impl Counters {
    pub(crate) fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters as `/metrics` exposes them: (name, help, value).
    pub(crate) fn exposition(&self) -> Vec<(&'static str, &'static str, u64)> {
        const HELP: [(&str, &str); 4] = [
            (
                "afr_ingest_busy_total",
                "Ingest requests refused with 503 (too many in flight).",
            ),
            (
                "afr_ingest_rejected_lines_total",
                "Event lines rejected as invalid.",
            ),
            (
                "afr_anchor_passes_total",
                "Anchoring passes run by the server.",
            ),
            ("afr_anchor_failures_total", "Anchoring passes that failed."),
        ];
        let values = [
            &self.busy,
            &self.rejected_lines,
            &self.anchor_passes,
            &self.anchor_failures,
        ]
        .map(|c| c.load(Ordering::Relaxed));
        HELP.into_iter()
            .zip(values)
            .map(|((name, help), v)| (name, help, v))
            .collect()
    }
}

/// What every handler shares.
#[derive(Debug)]
pub(crate) struct AppState {
    pub(crate) recorder: Recorder,
    pub(crate) dir: PathBuf,
    pub(crate) limits: Limits,
    pub(crate) inflight: Arc<Semaphore>,
    pub(crate) counters: Counters,
    pub(crate) receipt_signer: Option<ReceiptSigner>,
    pub(crate) hooks: Option<HookHandler>,
    /// Started on demand by a producer: idles out and hands over (see [`ServerConfig`]).
    pub(crate) on_demand: Option<Duration>,
    /// Client connections open now, on every listener.
    pub(crate) connections: AtomicUsize,
    /// Notified when a long-running server asked this on-demand one to hand over.
    pub(crate) handover: tokio::sync::Notify,
}

/// A server bound to its sockets, not yet serving.
#[derive(Debug)]
pub struct Server {
    state: Arc<AppState>,
    unix: tokio::net::UnixListener,
    tcp: Option<(tokio::net::TcpListener, Arc<Zeroizing<Vec<u8>>>)>,
    bound: Bound,
    anchor: Option<AnchorConfig>,
}

impl Server {
    /// Binds the Unix socket `<dir>/afr.sock` (mode 0600; a stale one is replaced only if
    /// nothing answers on it) and the TCP listener if configured. Must run inside a tokio
    /// runtime.
    pub fn bind(recorder: Recorder, config: ServerConfig) -> Result<Server, ServeError> {
        let socket = config.dir.join(SOCKET_FILE);
        let tcp = match config.tcp {
            None => None,
            Some(t) => {
                if t.token.is_empty() {
                    return Err(ServeError::NoToken);
                }
                if !t.addr.ip().is_loopback() && !t.allow_remote {
                    return Err(ServeError::NotLoopback(t.addr));
                }
                let l = listen::tcp(t.addr)?;
                Some((l, Arc::new(t.token)))
            }
        };
        let unix = listen::unix(&socket)?;
        let bound = Bound {
            socket,
            tcp: tcp.as_ref().and_then(|(l, _)| l.local_addr().ok()),
        };
        let state = Arc::new(AppState {
            recorder,
            dir: config.dir,
            inflight: Arc::new(Semaphore::new(config.limits.max_inflight.max(1))),
            limits: config.limits,
            counters: Counters::default(),
            receipt_signer: config.receipt_signer,
            hooks: config.hooks,
            on_demand: config.on_demand,
            connections: AtomicUsize::new(0),
            handover: tokio::sync::Notify::new(),
        });
        Ok(Server {
            state,
            unix,
            tcp,
            bound,
            anchor: config.anchor,
        })
    }

    /// Where the server listens.
    pub fn bound(&self) -> &Bound {
        &self.bound
    }

    /// Serves until `shutdown` completes, then drains, flushes and removes the socket.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), ServeError> {
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut loops = tokio::task::JoinSet::new();
        loops.spawn(listen::accept_loop(
            listen::Acceptor::Unix(self.unix),
            self.state.clone(),
            None,
            stop_rx.clone(),
        ));
        if let Some((l, token)) = self.tcp {
            loops.spawn(listen::accept_loop(
                listen::Acceptor::Tcp(l),
                self.state.clone(),
                Some(token),
                stop_rx.clone(),
            ));
        }
        let anchor = match self.anchor {
            Some(a) => Some(
                anchor::start(a, self.state.clone(), stop_rx.clone()).map_err(|source| {
                    ServeError::Io {
                        what: "start the anchoring thread".into(),
                        source,
                    }
                })?,
            ),
            None => None,
        };
        let state = self.state.clone();
        tokio::select! {
            () = shutdown => {}
            () = on_demand_over(&state) => {}
        }
        let _ = stop_tx.send(true);
        // Each accept loop stops accepting, then waits for its connections to drain.
        while loops.join_next().await.is_some() {}
        if let Some(a) = anchor {
            let _ = tokio::task::spawn_blocking(move || a.join()).await;
        }
        let _ = std::fs::remove_file(&self.bound.socket);
        let recorder = self.state.recorder.clone();
        tokio::task::spawn_blocking(move || recorder.flush())
            .await
            .map_err(|e| ServeError::Io {
                what: "flush the recorder".into(),
                source: std::io::Error::other(e.to_string()),
            })??;
        Ok(())
    }
}

/// Completes when an on-demand server should stop: a long-running server asked it to hand
/// over, or no client has been connected for its idle time. Never, for any other server.
async fn on_demand_over(state: &AppState) {
    let Some(idle) = state.on_demand else {
        return std::future::pending().await;
    };
    let tick = Duration::from_millis(100);
    let idle_out = async {
        let mut quiet = Duration::ZERO;
        loop {
            tokio::time::sleep(tick).await;
            if state.connections.load(Ordering::Relaxed) == 0 {
                quiet += tick;
                if quiet >= idle {
                    return;
                }
            } else {
                quiet = Duration::ZERO;
            }
        }
    };
    tokio::select! {
        () = state.handover.notified() => {}
        () = idle_out => {}
    }
}

/// Completes on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        // Without signal handlers the server runs until killed.
        _ => std::future::pending::<()>().await,
    }
}

/// Reads a bearer token from the first line of `path`, which must be a regular file of mode
/// 0600 (or stricter) and hold at least 16 bytes.
pub fn read_token_file(path: &Path) -> Result<Zeroizing<Vec<u8>>, ServeError> {
    use std::os::unix::fs::PermissionsExt;
    let bad = |message: String| ServeError::TokenFile {
        path: path.to_owned(),
        message,
    };
    let meta = std::fs::metadata(path).map_err(|e| bad(e.to_string()))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(bad(format!(
            "mode is {mode:o}; it must be 600 (it holds the server's bearer token)"
        )));
    }
    let text = Zeroizing::new(std::fs::read(path).map_err(|e| bad(e.to_string()))?);
    let line = text.split(|b| *b == b'\n').next().unwrap_or_default();
    let token = line.trim_ascii();
    if token.len() < 16 {
        return Err(bad("the token must be at least 16 bytes".into()));
    }
    if !token.iter().all(|b| b.is_ascii_graphic()) {
        return Err(bad(
            "the token must be printable ASCII without spaces".into()
        ));
    }
    Ok(Zeroizing::new(token.to_vec()))
}
