//! JSON-RPC plumbing of the driver: retries with backoff, batches, and errors with every URL
//! redacted (hosted endpoints carry API keys in the path).

use std::{borrow::Cow, time::Duration};

use alloy::rpc::{
    client::RpcClient,
    json_rpc::{RpcRecv, RpcSend},
};

use crate::{AnchorError, ContractRevert, Event};

/// An RPC error with `url` and any other URL in its text redacted.
pub(crate) fn rpc_err(url: &str, e: &dyn std::fmt::Display) -> AnchorError {
    AnchorError::Rpc(redact(url, &e.to_string()))
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
/// reporting each failed attempt through `on`.
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
    let mut last = String::new();
    for attempt in 1..=5 {
        match f().await {
            Ok(v) => return Ok(v),
            Err(AnchorError::Rpc(e)) => {
                on(&Event::Retry {
                    what,
                    attempt,
                    error: e.clone(),
                });
                last = e;
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
            Err(other) => return Err(other),
        }
    }
    Err(AnchorError::Rpc(format!("{what}: {last}")))
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
                    .map_err(|e| rpc_err(self.url, &format_args!("{what}: {e}")))
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
                        None => Err(rpc_err(self.url, &format_args!("{what}: {e}"))),
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
                            .map_err(|e| rpc_err(self.url, &format_args!("{what}: {e}")))?,
                    );
                }
                b.send()
                    .await
                    .map_err(|e| rpc_err(self.url, &format_args!("{what}: {e}")))?;
                let mut got = Vec::with_capacity(waiters.len());
                for w in waiters {
                    got.push(
                        w.await
                            .map_err(|e| rpc_err(self.url, &format_args!("{what}: {e}")))?,
                    );
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
            url,
            &"connection refused: https://mainnet.example.io/v3/SECRETKEY123",
        );
        assert!(!e.to_string().contains("SECRETKEY123"), "{e}");
        assert!(e.to_string().contains("mainnet.example.io"), "{e}");
    }
}
