//! Upstream URLs and the TLS settings of https upstreams.

use hyper::Uri;

use super::ProxyError;

/// The upstream as events name it: no credentials, no query (either may hold a secret).
pub(super) fn public_url(u: &Uri) -> String {
    let host = u.host().unwrap_or("");
    let port = u.port_u16().map(|p| format!(":{p}")).unwrap_or_default();
    format!(
        "{}://{host}{port}{}",
        u.scheme_str().unwrap_or("http"),
        u.path()
    )
}

pub(super) fn parse_upstream(url: &str) -> Result<Uri, ProxyError> {
    let bad = |why: &str| ProxyError::Upstream {
        url: afr_core::redact_urls_in(url),
        why: why.to_owned(),
    };
    let u: Uri = url.parse().map_err(|_| bad("not a URL"))?;
    match u.scheme_str() {
        Some("http" | "https") => {}
        _ => return Err(bad("the scheme must be http or https")),
    }
    if u.host().is_none_or(str::is_empty) {
        return Err(bad("no host"));
    }
    if u.authority().is_some_and(|a| a.as_str().contains('@')) {
        return Err(bad(
            "credentials in the URL are not forwarded; send them in a header from the client",
        ));
    }
    Ok(u)
}

/// An error with its causes (`client error (Connect): invalid peer certificate: UnknownIssuer`).
pub(super) fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

/// The TLS settings for an https upstream: the system's root certificates, plus those of
/// `extra` (PEM); certificates and host names always verified.
pub(super) fn tls_config(
    extra: Option<&std::path::Path>,
) -> Result<rustls::ClientConfig, ProxyError> {
    use rustls_pki_types::{CertificateDer, pem::PemObject};
    let bad = |why: String| ProxyError::Upstream {
        url: "--upstream-ca".into(),
        why,
    };
    let mut roots = rustls::RootCertStore::empty();
    // The system's roots: an unreadable one is skipped (as rustls-native-certs reports).
    let native = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(native.certs);
    if let Some(path) = extra {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .map_err(|e| bad(format!("{}: {e}", path.display())))?
            .collect::<Result<_, _>>()
            .map_err(|e| bad(format!("{}: {e}", path.display())))?;
        if certs.is_empty() {
            return Err(bad(format!("{}: no PEM certificate in it", path.display())));
        }
        for c in certs {
            roots
                .add(c)
                .map_err(|e| bad(format!("{}: {e}", path.display())))?;
        }
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(config)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn upstreams_without_secrets() {
        let u = parse_upstream("http://127.0.0.1:3001/mcp?key=s").unwrap();
        assert_eq!(public_url(&u), "http://127.0.0.1:3001/mcp");
        assert!(parse_upstream("https://x/mcp").is_ok());
        assert!(parse_upstream("ftp://x/mcp").is_err());
        assert!(parse_upstream("http://user:pw@x/mcp").is_err());
        assert!(parse_upstream("ftp://x/").is_err());
    }
}
