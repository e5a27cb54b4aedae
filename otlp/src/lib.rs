//! The OTLP receiver: agent frameworks that describe their tool calls as OpenTelemetry spans
//! record into AFR by pointing their OTLP exporter at `afr otlp`.
//!
//! - [`map`]: one AFR event per tool-execution span (GenAI semantic conventions, OpenInference,
//!   OpenLLMetry), pure.
//! - [`receiver`]: OTLP/HTTP and OTLP/gRPC, each export answered once its events are durable.
//!
//! User guide and the field-by-field mapping: `docs/otlp.md`.

pub mod map;
pub mod receiver;

pub use receiver::{ReceiverOptions, serve};
/// The OTLP types this crate reads (for benches and tests that build exports).
pub use {opentelemetry_proto, prost};
