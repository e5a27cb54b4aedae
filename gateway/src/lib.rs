//! The MCP gateway: AFR in the path of an agent's tool calls.
//!
//! `afr mcp wrap [--policy FILE] [--fail-open] -- <server command...>` stands between an MCP
//! client and a stdio server. It relays newline-delimited JSON-RPC both ways byte for byte
//! (it forwards the bytes it read and parses a copy, so fields it does not know survive),
//! records every `tools/call` before forwarding it ([`session`] describes the two events of a
//! call), and enforces a [`policy`]. User guide: `docs/gateway.md`.
//!
//! Guarantees:
//!
//! - A `tools/call` MUST NOT reach the server before its intent event is durable (group
//!   durability), unless `--fail-open` was given; a call that cannot be recorded is answered
//!   with a JSON-RPC error instead.
//! - A denied call MUST NOT reach the server; it is recorded with its evaluation.
//! - A message with a duplicate JSON key, a batch, or a line over the cap MUST NOT be
//!   forwarded.

pub mod json;
pub mod policy;
pub mod session;
pub mod sink;
pub mod wrap;

pub use policy::Policy;
pub use wrap::{WrapError, WrapOptions, run};
