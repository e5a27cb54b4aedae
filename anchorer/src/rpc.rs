//! JSON-RPC plumbing of the driver: retries with backoff, batches, and errors with every URL
//! redacted (hosted endpoints carry API keys in the path).

use std::{borrow::Cow, time::Duration};

use alloy::rpc::{
    client::RpcClient,
    json_rpc::{RpcRecv, RpcSend},
};

use alloy::primitives::{Address, B256};

use crate::{AnchorError, ContractRevert, Event};

/// Attempts a retried call makes before it gives up.
const ATTEMPTS: u32 = 5;

/// A JSON-RPC failure (see [`AnchorError::Rpc`]). The endpoint is redacted to its scheme, host
/// and port, and so is every URL in a message: hosted endpoints carry API keys in the path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RpcError {
    /// The endpoint did not answer, or answered the call with an error.
    #[error("{what}: {method} at {endpoint}{}: {message}", attempts_note(*.attempts))]
    Failed {
        /// What the call was for (`chain id`, `receipts`, `send`).
        what: &'static str,
        /// The JSON-RPC method (`batch` when a batch of several failed as a whole).
        method: &'static str,
        /// The endpoint, redacted.
        endpoint: String,
        /// The transport's or the node's message, every URL in it redacted.
        message: String,
        /// Attempts made before giving up.
        attempts: u32,
    },
    /// An answer that is not what the call returns (a missing field, a value out of range).
    #[error("malformed answer to {call}{}{}", epoch.map(|e| format!(" for epoch {e}")).unwrap_or_default(), tx.map(|t| format!(" for transaction {t}")).unwrap_or_default())]
    Malformed {
        /// The method or contract function answered (`eth_getTransactionReceipt`, `rootOf`).
        call: &'static str,
        /// The epoch asked about, where there is one.
        epoch: Option<u64>,
        /// The transaction asked about, where there is one.
        tx: Option<B256>,
    },
    /// A deployment transaction was mined but left no code at the address it deploys to.
    #[error(
        "deployment transaction {tx} ({}) left no code at {address}",
        if *.reverted { "reverted" } else { "mined" }
    )]
    NoCode {
        /// The deployment transaction.
        tx: B256,
        /// Where the code should be.
        address: Address,
        /// Whether the transaction reverted.
        reverted: bool,
    },
    /// A plain CREATE's receipt names no contract address.
    #[error("deployment transaction {tx} has no contract address in its receipt")]
    NoContractAddress {
        /// The deployment transaction.
        tx: B256,
    },
}

fn attempts_note(n: u32) -> String {
    if n > 1 {
        format!(" (after {n} attempts)")
    } else {
        String::new()
    }
}

/// A failed call of `method` (for `what`) at `url`, with `url` and any other URL in `e`
/// redacted.
pub(crate) fn rpc_err(
    what: &'static str,
    method: &'static str,
    url: &str,
    e: &dyn std::fmt::Display,
) -> AnchorError {
    AnchorError::Rpc(RpcError::Failed {
        what,
        method,
        endpoint: afr_core::redact_url(url),
        message: redact(url, &e.to_string()),
        attempts: 1,
    })
}

/// An answer to `call` that does not parse.
pub(crate) fn malformed(call: &'static str) -> AnchorError {
    AnchorError::Rpc(RpcError::Malformed {
        call,
        epoch: None,
        tx: None,
    })
}

/// `text` with `url` (even without its scheme) and every http(s) URL redacted.
pub(crate) fn redact(url: &str, text: &str) -> String {
    let mut t = text.to_owned();
    let bare = url.split_once("://").map_or(url, |(_, r)| r);
    for u in [url, bare] {
        if u.len() > 3 {
            t = t.replace(u, &afr_core::redact_url(url));
        }
    }
    afr_core::redact_urls_in(&t)
}

/// Runs `f` with retries and exponential backoff on RPC errors (5 attempts, 200 ms doubling),
/// reporting each failed attempt through `on`. The last failure is returned with the number
/// of attempts made.
pub(crate) async fn retry<T, F, Fut>(
    what: &'static str,
    on: &dyn Fn(&Event),
    mut f: F,
) -> Result<T, AnchorError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, AnchorError>>,
{
    let mut delay = Duration::from_millis(200);
    let mut attempt = 1;
    loop {
        match f().await {
            Ok(v) => return Ok(v),
            Err(AnchorError::Rpc(mut e)) => {
                on(&Event::Retry {
                    what,
                    attempt,
                    error: e.to_string(),
                });
                tokio::time::sleep(delay).await;
                delay *= 2;
                if attempt >= ATTEMPTS {
                    if let RpcError::Failed { attempts, .. } = &mut e {
                        *attempts = attempt;
                    }
                    return Err(AnchorError::Rpc(e));
                }
                attempt += 1;
            }
            Err(other) => return Err(other),
        }
    }
}

/// A JSON-RPC endpoint as the driver uses it: raw requests, batches, redacted errors.
pub(crate) struct Rpc<'a> {
    pub(crate) p: RpcClient,
    pub(crate) url: &'a str,
    pub(crate) on: &'a dyn Fn(&Event),
    pub(crate) max_batch: usize,
}

impl Rpc<'_> {
    /// One call, retried.
    pub(crate) async fn call<Params: RpcSend + Clone, R: RpcRecv>(
        &self,
        what: &'static str,
        method: &'static str,
        params: Params,
    ) -> Result<R, AnchorError> {
        retry(what, self.on, || {
            let params = params.clone();
            async move {
                self.p
                    .request::<Params, R>(Cow::Borrowed(method), params)
                    .await
                    .map_err(|e| rpc_err(what, method, self.url, &e))
            }
        })
        .await
    }

    /// One call, not retried, whose revert is decoded as a contract error. `Ok(Err(revert))`
    /// when the node answers with revert data.
    pub(crate) async fn call_or_revert<Params: RpcSend + Clone, R: RpcRecv>(
        &self,
        what: &'static str,
        method: &'static str,
        params: Params,
    ) -> Result<Result<R, ContractRevert>, AnchorError> {
        retry(what, self.on, || {
            let params = params.clone();
            async move {
                match self
                    .p
                    .request::<Params, R>(Cow::Borrowed(method), params)
                    .await
                {
                    Ok(r) => Ok(Ok(r)),
                    Err(e) => match e.as_error_resp().and_then(|p| p.as_revert_data()) {
                        Some(data) => Ok(Err(ContractRevert::decode(&data))),
                        None => Err(rpc_err(what, method, self.url, &e)),
                    },
                }
            }
        })
        .await
    }

    /// The same method over many parameter sets, in JSON-RPC batches of at most `max_batch`
    /// calls, each batch retried as a whole. Answers in order.
    pub(crate) async fn batch<Params: RpcSend, R: RpcRecv>(
        &self,
        what: &'static str,
        method: &'static str,
        params: &[Params],
    ) -> Result<Vec<R>, AnchorError> {
        let mut out = Vec::with_capacity(params.len());
        for chunk in params.chunks(self.max_batch.max(1)) {
            let answers = retry(what, self.on, || async move {
                let mut b = self.p.new_batch();
                let mut waiters = Vec::with_capacity(chunk.len());
                for p in chunk {
                    waiters.push(
                        b.add_call::<Params, R>(method, p)
                            .map_err(|e| rpc_err(what, method, self.url, &e))?,
                    );
                }
                b.send()
                    .await
                    .map_err(|e| rpc_err(what, "batch", self.url, &e))?;
                let mut got = Vec::with_capacity(waiters.len());
                for w in waiters {
                    got.push(w.await.map_err(|e| rpc_err(what, method, self.url, &e))?);
                }
                Ok(got)
            })
            .await?;
            out.extend(answers);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_never_carry_the_url_or_its_key() {
        let url = "https://mainnet.example.io/v3/SECRETKEY123";
        for text in [
            "error sending request for url (https://mainnet.example.io/v3/SECRETKEY123)",
            "POST mainnet.example.io/v3/SECRETKEY123 failed",
            "see https://other.example/path?apikey=SECRETKEY123 now",
        ] {
            let r = redact(url, text);
            assert!(!r.contains("SECRETKEY123"), "{r}");
        }
        let e = rpc_err(
            "chain id",
            "eth_chainId",
            url,
            &"connection refused: https://mainnet.example.io/v3/SECRETKEY123",
        );
        assert!(!e.to_string().contains("SECRETKEY123"), "{e}");
        assert!(e.to_string().contains("mainnet.example.io"), "{e}");
    }

    #[test]
    fn a_failure_names_the_call_its_method_and_how_often_it_was_tried() {
        let url = "https://mainnet.example.io/v3/SECRETKEY123";
        let on = |_: &Event| {};
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        // Five attempts with backoff: about 6 s.
        let e = rt.block_on(retry("receipts", &on, || async {
            Err::<(), _>(rpc_err(
                "receipts",
                "eth_getTransactionReceipt",
                url,
                &"timed out",
            ))
        }));
        let Err(AnchorError::Rpc(e)) = e else {
            panic!("{e:?}");
        };
        assert_eq!(
            e,
            RpcError::Failed {
                what: "receipts",
                method: "eth_getTransactionReceipt",
                endpoint: "https://mainnet.example.io/…".into(),
                message: "timed out".into(),
                attempts: ATTEMPTS,
            }
        );
        assert_eq!(
            AnchorError::Rpc(e).to_string(),
            "rpc: receipts: eth_getTransactionReceipt at https://mainnet.example.io/… (after 5 \
             attempts): timed out"
        );
        let m = RpcError::Malformed {
            call: "rootOf",
            epoch: Some(7),
            tx: None,
        };
        assert_eq!(m.to_string(), "malformed answer to rootOf for epoch 7");
    }
}
