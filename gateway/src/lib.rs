//! The MCP gateway: AFR in the path of an agent's tool calls.
//!
//! - `afr mcp wrap [--policy FILE] [--fail-open] -- <server command...>` stands between an MCP
//!   client and a stdio server ([`wrap`]);
//! - `afr mcp proxy --upstream URL` stands in front of a Streamable HTTP server ([`proxy`]).
//!
//! Both relay JSON-RPC byte for byte (they forward the bytes they read and parse a copy, so
//! fields they do not know survive), send every `tools/call` through one door
//! ([`gate::Gate::admit`]: record, then forward, deny or hold for a human), and describe calls
//! the same way ([`session`]). User guide: `docs/gateway.md`.
//!
//! Guarantees:
//!
//! - A `tools/call` MUST NOT reach the server before its intent event is durable (group
//!   durability), unless `--fail-open` was given; a call that cannot be recorded is answered
//!   with a JSON-RPC error instead.
//! - A denied call MUST NOT reach the server; it is recorded with its evaluation.
//! - An escalated call MUST NOT reach the server before a human approved it and that approval
//!   is recorded; rejected and timed-out calls are recorded and never forwarded.
//! - A message with a duplicate JSON key, a batch, or a message over the cap MUST NOT be
//!   forwarded.

pub mod approvals;
pub mod gate;
pub mod json;
pub mod policy;
pub mod proxy;
pub mod session;
pub mod wrap;

pub use gate::Gate;
pub use policy::Policy;
pub use wrap::{WrapError, WrapOptions, run};
