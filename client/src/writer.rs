//! Who writes: many producers, one writer, whatever starts first.
//!
//! A store has one writer (RocksDB's lock). Producers that come and go (a gateway per tool
//! call, an OTLP receiver, hooks) never hold it themselves: [`Door::producer`] connects to
//! `afr serve` when one answers on the directory, and otherwise starts one on demand
//! (`afr serve --on-demand`, in its own process group, output to
//! `<dir>/serve-on-demand.log`) and connects to that. Producers racing to start one start
//! several; one takes the store and the socket, the others exit, and every producer
//! connects to the winner. The on-demand server stops once no client has been connected for
//! a short while ([`ON_DEMAND_IDLE`]).
//!
//! A writer that goes away (killed) is replaced the same way: a producer's next submission
//! fails, it opens its door again, which starts a new server; acknowledged events were
//! durable, and the failed one is sent again under its idempotency key, so it is recorded
//! once. A long-running `afr serve` that finds an on-demand server asks it to hand the store
//! over (`POST /v1/handover`, see [`take_over`]) and waits for it to go; meanwhile
//! `<dir>/serve.takeover` tells producers to wait for the socket rather than start another.

use std::{
    fs::OpenOptions,
    io::{Read, Seek, SeekFrom},
    os::unix::{fs::OpenOptionsExt, process::CommandExt},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant, SystemTime},
};

use crate::{
    Door, DoorError,
    socket::{Client, ClientError},
};

/// How long an on-demand server waits with no client connected before it stops.
pub const ON_DEMAND_IDLE: Duration = Duration::from_secs(3);
/// The file a long-running `afr serve` holds while it takes the store over.
pub const TAKEOVER_FILE: &str = "serve.takeover";
/// Where an on-demand server writes what it says.
pub const ON_DEMAND_LOG: &str = "serve-on-demand.log";
/// How long a producer waits for a server to answer.
const WAIT: Duration = Duration::from_secs(15);
/// On-demand servers a producer starts before it gives up (each failed to take the store).
const START_TRIES: u32 = 3;
/// A takeover older than this was abandoned (its server died).
const TAKEOVER_STALE: Duration = Duration::from_secs(60);

fn takeover_in_progress(dir: &Path) -> bool {
    std::fs::metadata(dir.join(TAKEOVER_FILE))
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .is_some_and(|age| age < TAKEOVER_STALE)
}

/// The last lines of the on-demand log, for an error message.
fn log_tail(dir: &Path) -> String {
    let Ok(mut f) = std::fs::File::open(dir.join(ON_DEMAND_LOG)) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or_default();
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(600)));
    let mut s = String::new();
    let _ = f.read_to_string(&mut s);
    s.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// Starts `afr serve --on-demand` on `dir`.
fn start(dir: &Path, afr: &Path) -> std::io::Result<std::process::Child> {
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(dir.join(ON_DEMAND_LOG))?;
    Command::new(afr)
        .arg("--dir")
        .arg(dir)
        .args(["serve", "--on-demand"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        // Not in the producer's process group: Ctrl-C on the agent's terminal stops the agent,
        // and the server idles out after it.
        .process_group(0)
        .spawn()
}

/// What a producer does when no server answers on its directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoServer {
    /// Start `afr serve --on-demand` with this `afr` binary ([`Door::producer`]).
    StartOne(PathBuf),
    /// Open the store in this process as its writer (a process that is the only producer:
    /// benchmarks, tests of one component).
    OpenStore,
}

impl Door {
    /// The door of a producer, by `how` (see [`NoServer`]).
    pub fn for_producer(dir: &Path, how: &NoServer) -> Result<Door, DoorError> {
        match how {
            NoServer::StartOne(afr) => Door::producer(dir, afr),
            NoServer::OpenStore => Door::writer(dir, afr_recorder::Config::default()),
        }
    }

    /// The door of a producer: `afr serve` when one answers on `dir`, else one started on
    /// demand with the `afr` binary `afr` (see the [module docs](self)). Never the store
    /// itself, so a producer never holds the store's lock.
    pub fn producer(dir: &Path, afr: &Path) -> Result<Door, DoorError> {
        if let Some(c) = Client::running(dir) {
            return Ok(Door::served(dir, c));
        }
        if !dir.join(afr_recorder::DB_DIR).exists() {
            return Err(afr_recorder::RecordError::NotInitialised(dir.to_owned()).into());
        }
        let deadline = Instant::now() + WAIT;
        let mut child: Option<std::process::Child> = None;
        let mut failures = 0;
        loop {
            if let Some(c) = Client::running(dir) {
                if let Some(mut ch) = child {
                    // Reaped when it exits (a loser of a race at once, the winner when it
                    // idles out), so that no zombie is left.
                    std::thread::spawn(move || ch.wait());
                }
                return Ok(Door::served(dir, c));
            }
            match &mut child {
                None if !takeover_in_progress(dir) => {
                    child = Some(start(dir, afr).map_err(|e| no_server(dir, &e.to_string()))?);
                }
                Some(ch) => {
                    if let Ok(Some(status)) = ch.try_wait() {
                        child = None;
                        // It lost a race (another server answers next round), or it could not
                        // take the store: a server idling out may still hold it for a moment,
                        // so a few more tries; then say why, unless another server comes up.
                        if !status.success() {
                            failures += 1;
                            std::thread::sleep(Duration::from_millis(100));
                            if let Some(c) = Client::running(dir) {
                                return Ok(Door::served(dir, c));
                            }
                            if failures >= START_TRIES && !takeover_in_progress(dir) {
                                return Err(no_server(dir, &log_tail(dir)));
                            }
                        }
                    }
                }
                None => {}
            }
            if Instant::now() >= deadline {
                return Err(no_server(dir, "no server answered in time"));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

fn no_server(dir: &Path, why: &str) -> DoorError {
    DoorError::Socket(ClientError::Io {
        path: dir.join(crate::SOCKET_FILE),
        source: std::io::Error::other(format!(
            "no afr serve answers and none could be started on demand: {}",
            if why.is_empty() {
                "see serve-on-demand.log"
            } else {
                why
            }
        )),
    })
}

/// Holds `<dir>/serve.takeover` while a long-running writer takes the store; removed on drop.
#[derive(Debug)]
pub struct Takeover {
    path: PathBuf,
}

impl Drop for Takeover {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Before a process opens the store as its writer (`afr serve`, `afr anchor`, ...): if a
/// server started on demand holds it, asks that server to hand it over and waits until it
/// is gone. Producers wait for the socket meanwhile, rather than start another server; the
/// returned guard tells them so until it drops (after the caller has bound its socket, or
/// finished). A long-running `afr serve` is left alone (the caller reports it).
pub fn take_over(dir: &Path) -> Result<Takeover, DoorError> {
    let path = dir.join(TAKEOVER_FILE);
    let _ = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(&path);
    let guard = Takeover { path };
    let Some(mut c) = Client::running(dir) else {
        return Ok(guard);
    };
    let r = c.request("GET", "/v1/status", None, b"")?;
    let status = r.json();
    if status["on_demand"] != true {
        return Ok(guard);
    }
    let pid = status["pid"].as_u64();
    let r = c.request("POST", "/v1/handover", None, b"")?;
    if r.status != 200 {
        return Err(DoorError::server("POST /v1/handover", &r));
    }
    drop(c);
    let deadline = Instant::now() + WAIT;
    // Gone once its socket is and its process has exited (it drops the store last).
    while Client::running(dir).is_some() || pid.is_some_and(alive) {
        if Instant::now() >= deadline {
            return Err(no_server(
                dir,
                "the on-demand server did not hand the store over in time",
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(guard)
}

/// Whether process `pid` runs (a zombie has exited: its locks are released).
pub(crate) fn alive(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        // `pid (comm) state ...`: the state follows the last `)`.
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}
