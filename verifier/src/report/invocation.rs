//! How a report was asked for, and the commands that repeat it.

use afr_core::Hash32;

/// How the verdict was asked for: what the report's "re-verify" commands repeat. Paths are
/// as given on the command line; the RPC URL is written only as [`afr_core::redact_url`]
/// makes it (scheme, host and port).
#[derive(Debug, Clone, Default)]
pub struct Invocation {
    /// `log`, `bundle` or `case`.
    pub command: &'static str,
    /// The files (for a case: the case file first, unless `--trust` is given, then bundles).
    pub files: Vec<String>,
    /// `--trust FILE`.
    pub trust: Option<String>,
    /// `--chain-id`.
    pub chain_id: Option<u64>,
    /// `--contract`.
    pub contract: Option<String>,
    /// `--recorder`.
    pub recorder: Option<String>,
    /// `--rpc`, each: only their redacted forms are written.
    pub rpc: Vec<String>,
    /// `--block`.
    pub block: Option<u64>,
    /// `--from-block`.
    pub from_block: u64,
    /// `--anchors` (one for a log or a bundle; any number for a case).
    pub anchors: Vec<String>,
    /// `--unproven-anchors`.
    pub unproven_anchors: bool,
    /// The evidence files read: name, size and SHA-256 of the very bytes verified (hashed as
    /// they were read for verification, never read again), so the reader knows which bytes
    /// were judged.
    pub digests: Vec<(String, u64, Hash32)>,
}

impl Invocation {
    /// The commands that repeat this verification, one per line, shell-quoted.
    pub(super) fn commands(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut a: Vec<String> = vec!["afr-verify".into(), self.command.into()];
        if let Some(t) = &self.trust {
            a.extend(["--trust".into(), t.clone()]);
        }
        a.extend(self.files.iter().cloned());
        let mut pins = Vec::new();
        if let Some(c) = self.chain_id {
            pins.extend(["--chain-id".into(), c.to_string()]);
        }
        if let Some(c) = &self.contract {
            pins.extend(["--contract".into(), c.clone()]);
        }
        if let Some(r) = &self.recorder {
            pins.extend(["--recorder".into(), r.clone()]);
        }
        a.extend(pins.iter().cloned());
        let mut source = Vec::new();
        for url in &self.rpc {
            source.extend(["--rpc".into(), afr_core::redact_url(url)]);
        }
        if !self.rpc.is_empty() {
            if let Some(b) = self.block {
                source.extend(["--block".into(), b.to_string()]);
            }
            if self.from_block != 0 {
                source.extend(["--from-block".into(), self.from_block.to_string()]);
            }
        }
        for f in &self.anchors {
            source.extend(["--anchors".into(), f.clone()]);
        }
        if self.unproven_anchors && !self.anchors.is_empty() {
            source.push("--unproven-anchors".into());
        }
        a.extend(source);
        out.push(shell_line(&a));
        // Air-gapped: fetch the anchors once, then verify offline.
        if let (false, Some(rec), Some(chain), "log" | "bundle") = (
            self.rpc.is_empty(),
            &self.recorder,
            self.chain_id,
            self.command,
        ) {
            let mut f: Vec<String> = vec!["afr-verify".into(), "anchors".into()];
            for url in &self.rpc {
                f.extend(["--rpc".into(), afr_core::redact_url(url)]);
            }
            f.extend([
                "--chain-id".into(),
                chain.to_string(),
                "--recorder".into(),
                rec.clone(),
            ]);
            if let Some(c) = &self.contract {
                f.extend(["--contract".into(), c.clone()]);
            }
            if let Some(b) = self.block {
                f.extend(["--block".into(), b.to_string()]);
            }
            f.extend(["--out".into(), "anchors.json".into()]);
            out.push(shell_line(&f));
            let mut g: Vec<String> = vec!["afr-verify".into(), self.command.into()];
            g.extend(self.files.iter().cloned());
            g.extend(["--anchors".into(), "anchors.json".into()]);
            g.extend(pins);
            out.push(shell_line(&g));
        }
        out
    }
}

/// Words joined into one shell command line, each quoted if it needs to be.
fn shell_line(words: &[String]) -> String {
    words
        .iter()
        .map(|w| {
            if !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-./:=@%+,…".contains(c))
            {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_never_hold_the_endpoint_path() {
        let inv = Invocation {
            command: "bundle",
            files: vec!["case one.bundle".into()],
            chain_id: Some(10),
            recorder: Some("0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266".into()),
            rpc: vec!["https://rpc.example/v2/SECRETKEY?k=1".into()],
            ..Invocation::default()
        };
        let c = inv.commands();
        assert_eq!(
            c[0],
            "afr-verify bundle 'case one.bundle' --chain-id 10 --recorder \
             0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266 --rpc https://rpc.example/…"
        );
        assert!(c.iter().all(|l| !l.contains("SECRET")), "{c:?}");
        assert_eq!(c.len(), 3, "{c:?}");
    }
}
