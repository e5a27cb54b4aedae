//! The OTLP receiver: agent frameworks that describe their tool calls as OpenTelemetry spans,
//! and coding-agent CLIs that log them as OpenTelemetry log records, record into AFR by
//! pointing their OTLP exporter at `afr otlp`.
//!
//! - [`map`]: one AFR event per tool-execution span (GenAI semantic conventions, OpenInference,
//!   OpenLLMetry), pure.
//! - [`logs`]: one AFR event per tool call the coding-agent CLIs (Claude Code, Codex, Gemini
//!   CLI) log as OTLP log records, pure.
//! - [`calls`]: the receiver's memory of those calls: decisions held for their results,
//!   Gemini CLI's calls named by rank, the calls `afr hook` records left to it.
//! - [`receiver`]: OTLP/HTTP and OTLP/gRPC, traces and logs, each export answered once its
//!   events are durable.
//!
//! User guide and the field-by-field mapping: `docs/otlp.md`.

pub mod calls;
mod http;
pub mod logs;
pub mod map;
pub mod receiver;

pub use receiver::{ReceiverOptions, serve};
/// The OTLP types this crate reads (for benches and tests that build exports).
pub use {opentelemetry_proto, prost};
