//! The async runtime of a network service (the MCP proxy, the OTLP receiver), and why one
//! could not start.

use std::net::SocketAddr;

/// The runtime of a network service: two workers (the machines AFR targets have two cores).
pub fn runtime() -> Result<tokio::runtime::Runtime, StartError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(StartError::Runtime)
}

/// Errors starting a network service (the proxy, the OTLP receiver).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The async runtime could not start.
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
}
