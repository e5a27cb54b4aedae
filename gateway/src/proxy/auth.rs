//! Who a client is: a bearer token the operator gave a name (`--client-token NAME=FILE`).
//!
//! With tokens configured, every request (POST, GET, DELETE) must carry `Authorization:
//! Bearer <token>` for one of them, or it is answered `401` and nothing is forwarded. The
//! token's name is recorded as the call's `delegation_provenance.on_behalf_of`, beside the
//! MCP `clientInfo` (`code_provenance.agent`), which the client names itself.
//!
//! Tokens are compared as SHA-256 digests in constant time ([`subtle`]), every configured
//! token on every request, so neither a token's bytes nor its length nor which token matched
//! shows in the time taken. A token is never logged, recorded or put in an error message.

use hyper::{HeaderMap, header};
use sha2::{Digest, Sha256};
use subtle::{ConditionallySelectable, ConstantTimeEq};
use zeroize::Zeroizing;

/// One client's bearer token and the name recorded for its calls.
pub struct ClientToken {
    /// The name (`alice`, `ci-bot`): recorded as `on_behalf_of`.
    pub name: String,
    /// The token's bytes (the first line of its file, trimmed).
    pub token: Zeroizing<Vec<u8>>,
}

impl std::fmt::Debug for ClientToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientToken")
            .field("name", &self.name)
            .field("token", &"<redacted>")
            .finish()
    }
}

/// The configured tokens, as digests.
pub(super) struct Tokens {
    digests: Vec<(String, Zeroizing<[u8; 32]>)>,
}

/// What a request's credentials say.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Identity {
    /// No tokens are configured: nobody is authenticated, everyone is let in.
    Anonymous,
    /// The client presented the token of this name.
    Named(String),
    /// Tokens are configured and the request carries none of them.
    Refused,
}

fn digest(b: &[u8]) -> Zeroizing<[u8; 32]> {
    Zeroizing::new(Sha256::digest(b).into())
}

impl Tokens {
    /// The tokens; refused if two share a name or a value, or a name is not a plain word.
    pub(super) fn new(tokens: Vec<ClientToken>) -> Result<Tokens, String> {
        let mut digests: Vec<(String, Zeroizing<[u8; 32]>)> = Vec::new();
        for t in tokens {
            let ok = !t.name.is_empty()
                && t.name.len() <= 64
                && t.name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.@".contains(&b));
            if !ok {
                return Err(format!(
                    "--client-token {:?}: a name is 1 to 64 letters, digits, `-`, `_`, `.` or `@`",
                    afr_core::text::escape(&t.name)
                ));
            }
            let d = digest(&t.token);
            if digests.iter().any(|(n, _)| *n == t.name) {
                return Err(format!(
                    "--client-token {}: the name is given twice",
                    t.name
                ));
            }
            if let Some((n, _)) = digests.iter().find(|(_, x)| **x == *d) {
                return Err(format!(
                    "--client-token {} and {n}: the same token (a token must name one client)",
                    t.name
                ));
            }
            digests.push((t.name, d));
        }
        Ok(Tokens { digests })
    }

    /// Whether any token is configured (then every request must carry one).
    pub(super) fn configured(&self) -> bool {
        !self.digests.is_empty()
    }

    /// Who sent a request with these headers.
    pub(super) fn identify(&self, headers: &HeaderMap) -> Identity {
        if self.digests.is_empty() {
            return Identity::Anonymous;
        }
        let given = headers
            .get(header::AUTHORIZATION)
            .map(|v| v.as_bytes())
            .and_then(|v| {
                let (scheme, rest) = v.split_at_checked(7)?;
                scheme
                    .eq_ignore_ascii_case(b"bearer ")
                    .then(|| rest.trim_ascii())
            });
        let Some(given) = given else {
            return Identity::Refused;
        };
        let given = digest(given);
        // Every token is compared, whichever matches: the index of the match is selected in
        // constant time, not branched on.
        let mut found = subtle::Choice::from(0);
        let mut index = 0u64;
        for (i, (_, d)) in self.digests.iter().enumerate() {
            let hit = d.ct_eq(&*given);
            index = u64::conditional_select(&index, &(i as u64), hit);
            found |= hit;
        }
        if bool::from(found) {
            let i = usize::try_from(index).unwrap_or(usize::MAX);
            match self.digests.get(i) {
                Some((name, _)) => Identity::Named(name.clone()),
                None => Identity::Refused,
            }
        } else {
            Identity::Refused
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    fn tok(name: &str, t: &str) -> ClientToken {
        ClientToken {
            name: name.into(),
            token: Zeroizing::new(t.as_bytes().to_vec()),
        }
    }

    fn with(auth: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(a) = auth {
            h.insert(header::AUTHORIZATION, a.parse().unwrap());
        }
        h
    }

    #[test]
    fn each_token_names_its_client() {
        let t = Tokens::new(vec![
            tok("alice", "a-token-of-16-bytes"),
            tok("bob", "b-token-of-16-bytes"),
        ])
        .unwrap();
        let id = |a| t.identify(&with(a));
        assert_eq!(
            id(Some("Bearer a-token-of-16-bytes")),
            Identity::Named("alice".into())
        );
        assert_eq!(
            id(Some("bearer b-token-of-16-bytes")),
            Identity::Named("bob".into())
        );
        assert_eq!(id(Some("Bearer c-token-of-16-bytes")), Identity::Refused);
        assert_eq!(id(Some("Basic a-token-of-16-bytes")), Identity::Refused);
        assert_eq!(id(Some("Bearer")), Identity::Refused);
        assert_eq!(id(None), Identity::Refused);
        let none = Tokens::new(Vec::new()).unwrap();
        assert_eq!(none.identify(&with(None)), Identity::Anonymous);
        assert!(!none.configured() && t.configured());
    }

    #[test]
    fn a_token_names_one_client() {
        assert!(
            Tokens::new(vec![
                tok("a", "same-token-xxxxxx"),
                tok("b", "same-token-xxxxxx")
            ])
            .is_err()
        );
        assert!(
            Tokens::new(vec![
                tok("a", "one-token-xxxxxxx"),
                tok("a", "two-token-xxxxxxx")
            ])
            .is_err()
        );
        assert!(Tokens::new(vec![tok("a b", "one-token-xxxxxxx")]).is_err());
        let e = format!("{:?}", tok("a", "secret-token-xxxx"));
        assert!(!e.contains("secret"), "{e}");
    }
}
