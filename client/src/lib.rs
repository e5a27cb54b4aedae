//! `afr-client`: the one door to a recorder.
//!
//! Every process that records events or reads a log reaches the recorder of a directory
//! through a [`Door`]: `afr serve` over its Unix socket when one answers, else the store
//! in-process (as its writer, or read-only). A new producer (a hook, a receiver, a wrapper)
//! depends on this crate only: it links the recorder, never the anchorer or the server.
//!
//! - [`Door`], [`Ticket`]: submit events under idempotency keys, settle them once durable;
//!   read status, queries and events. The contract is on [`Door`].
//! - [`writer`]: many producers, one writer: [`Door::producer`] starts `afr serve` on demand
//!   when none runs, and [`take_over`] hands the store to a long-running writer.
//! - [`journal`]: the producers' write-ahead journals (a call journaled before it runs,
//!   recorded after it answers), and the recovery of journals whose process died.
//! - [`socket`]: the blocking HTTP/1.1 client of `afr serve`'s socket.
//! - [`http`]: request bodies read under bounds, response bodies streamed from blocking
//!   code (`afr serve`, the MCP proxy).
//! - [`runtime`]: the async runtime of a network producer, and why one could not start.

pub mod http;
pub mod journal;
pub mod runtime;
pub mod socket;
pub mod wrapped;
pub mod writer;

mod door;

pub use door::{Door, DoorError, Sealed, Ticket, url_encode};
pub use runtime::{StartError, runtime};
pub use writer::{NoServer, take_over};

/// Name of the Unix socket `afr serve` listens on inside a recorder directory.
pub const SOCKET_FILE: &str = "afr.sock";
