//! A blocking RFC 3161 client over HTTP(S): POST a TimeStampReq, read the TimeStampResp.

use std::sync::Arc;
use std::time::Duration;

use ureq::tls::{RootCerts, TlsConfig};

use crate::Token;
use crate::request::{ReplyError, answers, request, token_from_reply};

/// The longest reply read, in bytes; a longer one is refused.
pub const MAX_REPLY_LEN: u64 = 1 << 20;
/// The default limit on one whole exchange (connect, send, receive).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

const QUERY_TYPE: &str = "application/timestamp-query";
const REPLY_TYPE: &str = "application/timestamp-reply";

/// Getting a token failed. Strings from the TSA are kept as sent: escape before printing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// Connecting, TLS, sending or receiving failed, or the exchange ran over its timeout.
    #[error("{url}: {reason}")]
    Transport {
        /// The TSA's URL.
        url: String,
        /// What failed.
        reason: String,
    },
    /// The TSA answered with an HTTP status other than 200.
    #[error("{url}: HTTP status {status}")]
    Status {
        /// The TSA's URL.
        url: String,
        /// The status.
        status: u16,
    },
    /// The reply is not `application/timestamp-reply`.
    #[error("{url}: content type {content_type:?}, expected {REPLY_TYPE}")]
    ContentType {
        /// The TSA's URL.
        url: String,
        /// The Content-Type sent (empty if none).
        content_type: String,
    },
    /// The reply is longer than [`MAX_REPLY_LEN`].
    #[error("{url}: reply longer than {max} bytes")]
    TooLarge {
        /// The TSA's URL.
        url: String,
        /// The limit.
        max: u64,
    },
    /// The reply carries no granted token for this request.
    #[error("{url}: {source}")]
    Reply {
        /// The TSA's URL.
        url: String,
        /// What was wrong with the reply.
        #[source]
        source: ReplyError,
    },
}

/// A TSA client: one HTTP agent (connection pool, TLS roots, timeout), reused across calls.
#[derive(Debug, Clone)]
pub struct Client {
    agent: ureq::Agent,
}

/// The system's trust roots for https, or the bundled Mozilla roots if it has none.
fn roots() -> RootCerts {
    let found = rustls_native_certs::load_native_certs();
    let certs: Vec<_> = found
        .certs
        .iter()
        .map(|c| ureq::tls::Certificate::from_der(c.as_ref()).to_owned())
        .collect();
    if certs.is_empty() {
        RootCerts::WebPki
    } else {
        RootCerts::Specific(Arc::new(certs))
    }
}

impl Client {
    /// A client whose every exchange must finish within `timeout`. http and https URLs are
    /// both accepted (a token is signed, so TLS adds privacy, not trust); https uses the
    /// system's roots. Redirects are not followed.
    pub fn new(timeout: Duration) -> Self {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .max_redirects(0)
            .tls_config(TlsConfig::builder().root_certs(roots()).build())
            .build();
        Self {
            agent: config.into(),
        }
    }

    /// Asks the TSA at `url` for a token over `digest`, with a fresh random nonce, and checks
    /// that the reply is granted and answers this request (imprint, nonce). The token is not
    /// verified: run [`crate::verify`] on it (now, and whenever it is relied on).
    pub fn timestamp(&self, url: &str, digest: &[u8; 32]) -> Result<Token, ClientError> {
        let nonce: u64 = rand::random();
        let transport = |e: ureq::Error| match e {
            ureq::Error::BodyExceedsLimit(_) => ClientError::TooLarge {
                url: url.into(),
                max: MAX_REPLY_LEN,
            },
            e => ClientError::Transport {
                url: url.into(),
                reason: e.to_string(),
            },
        };
        let mut resp = self
            .agent
            .post(url)
            .header("Content-Type", QUERY_TYPE)
            .send(&request(digest, nonce)[..])
            .map_err(transport)?;
        let status = resp.status().as_u16();
        if status != 200 {
            return Err(ClientError::Status {
                url: url.into(),
                status,
            });
        }
        let content_type = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let mime = content_type.split(';').next().unwrap_or("").trim();
        if !mime.eq_ignore_ascii_case(REPLY_TYPE) {
            return Err(ClientError::ContentType {
                url: url.into(),
                content_type,
            });
        }
        let body = resp
            .body_mut()
            .with_config()
            .limit(MAX_REPLY_LEN)
            .read_to_vec()
            .map_err(transport)?;
        let reply = |source| ClientError::Reply {
            url: url.into(),
            source,
        };
        let token = token_from_reply(&body).map_err(reply)?;
        answers(&token, digest, nonce).map_err(reply)?;
        Ok(token)
    }
}

/// [`Client::timestamp`] with a new client and [`DEFAULT_TIMEOUT`].
pub fn timestamp(url: &str, digest: &[u8; 32]) -> Result<Token, ClientError> {
    Client::new(DEFAULT_TIMEOUT).timestamp(url, digest)
}
