//! afr-tsa against real peers: a TSA that is Debian's `openssl ts -reply` behind an HTTP shim
//! (tests/tsa/tsa_shim.py), with its own CA made here by openssl, and the PyPI
//! `rfc3161-client` package (tests/tsa/check_rfc3161.py, in the project's .venv from
//! scripts/setup.sh) verifying the same tokens independently.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test support: a failed step ends the test"
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use afr_tsa::{Client, ClientError, ReplyError, TrustedCert, TsaError, verify};
use sha2::{Digest, Sha256};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn run(cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e} (scripts/setup.sh installs openssl)"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn openssl(dir: &Path, args: &[&str]) {
    run(Command::new("openssl").current_dir(dir).args(args));
}

const EXTENSIONS: &str = "\
[ ca ]
basicConstraints = critical, CA:true
keyUsage = critical, keyCertSign
subjectKeyIdentifier = hash
[ tsa ]
basicConstraints = critical, CA:false
keyUsage = critical, digitalSignature, nonRepudiation
extendedKeyUsage = critical, timeStamping
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
";

/// A CA (`NAME-ca.pem`) and a TSA certificate it issues (`NAME-tsa.pem`, key `NAME-tsa.key`).
fn pki(dir: &Path, name: &str, tsa_key: &[&str]) {
    let f = |s: &str| format!("{name}-{s}");
    openssl(
        dir,
        &[
            "ecparam",
            "-name",
            "prime256v1",
            "-genkey",
            "-noout",
            "-out",
            &f("ca.key"),
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-new",
            "-x509",
            "-key",
            &f("ca.key"),
            "-subj",
            &format!("/O=AFR it/CN={name} CA"),
            "-days",
            "3650",
            "-sha256",
            "-config",
            "ext.cnf",
            "-extensions",
            "ca",
            "-out",
            &f("ca.pem"),
        ],
    );
    openssl(dir, &[tsa_key, &["-out", &f("tsa.key")]].concat());
    openssl(
        dir,
        &[
            "req",
            "-new",
            "-key",
            &f("tsa.key"),
            "-subj",
            &format!("/O=AFR it/CN={name} TSA"),
            "-config",
            "ext.cnf",
            "-out",
            &f("tsa.csr"),
        ],
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &f("tsa.csr"),
            "-CA",
            &f("ca.pem"),
            "-CAkey",
            &f("ca.key"),
            "-CAcreateserial",
            "-days",
            "3650",
            "-sha256",
            "-extfile",
            "ext.cnf",
            "-extensions",
            "tsa",
            "-out",
            &f("tsa.pem"),
        ],
    );
}

/// `openssl ts -reply` configuration: one section per URL path of the shim.
fn ts_section(name: &str, signer: &str, digests: &str) -> String {
    format!(
        "[ {name} ]\nserial = ./{name}.serial\ncrypto_device = builtin\nsigner_cert = ./{signer}-tsa.pem\n\
         signer_key = ./{signer}-tsa.key\nsigner_digest = sha256\ndefault_policy = 1.3.6.1.4.1.99999.2.1\n\
         digests = {digests}\naccuracy = secs:1\ntsa_name = yes\ness_cert_id_alg = sha256\n"
    )
}

struct Tsa {
    dir: tempfile::TempDir,
    base: String,
    _child: Child,
    /// Held open: the shim exits when it closes, that is when this process ends.
    _stdin: ChildStdin,
}

impl Tsa {
    fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }
    fn url(&self, section: &str) -> String {
        format!("{}/{section}", self.base)
    }
    fn trusted(&self, file: &str) -> Vec<TrustedCert> {
        TrustedCert::parse(&std::fs::read(self.path(file)).unwrap()).unwrap()
    }
}

/// One PKI and one shim for the whole binary.
fn tsa() -> &'static Tsa {
    static TSA: OnceLock<Tsa> = OnceLock::new();
    TSA.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("ext.cnf"), EXTENSIONS).unwrap();
        pki(
            d,
            "trusted",
            &[
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:2048",
            ],
        );
        pki(
            d,
            "other",
            &[
                "genpkey",
                "-algorithm",
                "EC",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
            ],
        );
        let config = [
            ts_section("tsa", "trusted", "sha256"),
            ts_section("untrusted", "other", "sha256"),
            ts_section("sha384only", "trusted", "sha384"),
        ]
        .concat();
        std::fs::write(d.join("ts.cnf"), config).unwrap();
        for s in ["tsa", "untrusted", "sha384only"] {
            std::fs::write(d.join(format!("{s}.serial")), "01\n").unwrap();
        }
        let mut child = Command::new("python3")
            .arg(root().join("tests/tsa/tsa_shim.py"))
            .arg(d.join("ts.cnf"))
            .current_dir(d)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let base = line
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("tsa_shim: {line:?}"))
            .to_string();
        let stdin = child.stdin.take().unwrap();
        Tsa {
            dir,
            base,
            _child: child,
            _stdin: stdin,
        }
    })
}

fn digest(note: &str) -> [u8; 32] {
    Sha256::digest(note.as_bytes()).into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// rfc3161-client's verdict on `token` over `digest` under the root `root_pem`.
fn rfc3161_client(token: &[u8], digest: &[u8; 32], root_pem: &Path) -> serde_json::Value {
    let python = root().join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} missing: run scripts/setup.sh",
        python.display()
    );
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), token).unwrap();
    let out = Command::new(python)
        .arg(root().join("tests/tsa/check_rfc3161.py"))
        .arg(file.path())
        .arg(hex(digest))
        .arg(root_pem)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {stdout} {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(v["ok"].as_bool(), Some(out.status.success()), "{v}");
    v
}

fn client() -> Client {
    Client::new(Duration::from_secs(30))
}

#[test]
fn openssl_token_verifies_here_and_in_rfc3161_client() {
    let tsa = tsa();
    let d = digest("afr.example/recorder\n42\nroot\n");
    let before = SystemTime::now();
    let token = client().timestamp(&tsa.url("tsa"), &d).unwrap();
    let ts = verify(token.as_der(), &d, &tsa.trusted("trusted-ca.pem")).unwrap();
    assert_eq!(ts.policy, "1.3.6.1.4.1.99999.2.1");
    assert!(ts.signer.contains("trusted TSA"), "{}", ts.signer);
    assert!(
        ts.tsa_name
            .as_deref()
            .is_some_and(|n| n.contains("trusted TSA"))
    );
    let slack = Duration::from_secs(120);
    assert!(ts.gen_time + slack >= before && ts.gen_time <= SystemTime::now() + slack);
    // Pinning the TSA's own certificate instead of its CA.
    verify(token.as_der(), &d, &tsa.trusted("trusted-tsa.pem")).unwrap();

    let theirs = rfc3161_client(token.as_der(), &d, &tsa.path("trusted-ca.pem"));
    assert_eq!(theirs["ok"], true, "{theirs}");
    assert_eq!(theirs["policy"], ts.policy.as_str());
    let ours_secs = ts
        .gen_time
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert_eq!(theirs["gen_time"].as_f64(), Some(ours_secs.floor()));
    assert_eq!(
        theirs["serial"].as_str().unwrap(),
        ts.serial_hex().trim_start_matches('0')
    );
}

#[test]
fn token_over_another_digest_fails_in_both() {
    let tsa = tsa();
    let d = digest("checkpoint 1");
    let token = client().timestamp(&tsa.url("tsa"), &d).unwrap();
    let other = digest("checkpoint 2");
    assert_eq!(
        verify(token.as_der(), &other, &tsa.trusted("trusted-ca.pem")),
        Err(TsaError::DigestMismatch)
    );
    let theirs = rfc3161_client(token.as_der(), &other, &tsa.path("trusted-ca.pem"));
    assert_eq!(theirs["ok"], false, "{theirs}");
}

#[test]
fn untrusted_tsa_fails_in_both() {
    let tsa = tsa();
    let d = digest("checkpoint 3");
    let token = client().timestamp(&tsa.url("untrusted"), &d).unwrap();
    let e = verify(token.as_der(), &d, &tsa.trusted("trusted-ca.pem")).unwrap_err();
    assert!(matches!(e, TsaError::Untrusted { .. }), "{e}");
    let theirs = rfc3161_client(token.as_der(), &d, &tsa.path("trusted-ca.pem"));
    assert_eq!(theirs["ok"], false, "{theirs}");
    // Under its own CA it verifies, in both.
    verify(token.as_der(), &d, &tsa.trusted("other-ca.pem")).unwrap();
    assert_eq!(
        rfc3161_client(token.as_der(), &d, &tsa.path("other-ca.pem"))["ok"],
        true
    );
}

#[test]
fn refusal_by_the_tsa_is_reported() {
    let tsa = tsa();
    match client().timestamp(&tsa.url("sha384only"), &digest("x")) {
        Err(ClientError::Reply {
            source: ReplyError::Refused {
                status, fail_info, ..
            },
            ..
        }) => {
            assert_eq!(status, 2);
            assert_eq!(fail_info, ["badAlg"]);
        }
        other => panic!("{other:?}"),
    }
    match client().timestamp(&tsa.url("nosuch"), &digest("x")) {
        Err(ClientError::Status {
            status: 500 | 404, ..
        }) => {}
        other => panic!("{other:?}"),
    }
}

/// The fixtures of tsa/testdata/ (openssl-made), judged by both verifiers.
#[test]
fn fixtures_agree_with_rfc3161_client() {
    let data = root().join("tsa/testdata");
    let d: [u8; 32] = std::fs::read(data.join("digest.bin"))
        .unwrap()
        .try_into()
        .unwrap();
    let trusted = TrustedCert::parse(&std::fs::read(data.join("ca.pem")).unwrap()).unwrap();
    let mut seen = 0;
    for entry in std::fs::read_dir(&data).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "tst") {
            continue;
        }
        let token = std::fs::read(&path).unwrap();
        let ours = verify(&token, &d, &trusted);
        let theirs = rfc3161_client(&token, &d, &data.join("ca.pem"));
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name == "cms-resigned.tst" {
            // The one difference: no ESS signing-certificate attribute. RFC 3161 2.4.1
            // (with RFC 5816) requires one; rfc3161-client does not check it, afr-tsa does.
            assert_eq!(
                ours,
                Err(TsaError::MissingAttribute {
                    name: "signing-certificate"
                })
            );
            assert_eq!(theirs["ok"], true, "{theirs}");
        } else {
            assert_eq!(
                ours.is_ok(),
                theirs["ok"] == true,
                "{name}: ours {ours:?}, theirs {theirs}"
            );
        }
        seen += 1;
    }
    assert!(seen >= 10, "{seen} fixtures");
}

/// A server on 127.0.0.1 that answers one connection with `reply` (or nothing), then keeps it
/// open for `hold` (closing with the request unread would reset it before the client reads).
fn one_shot(reply: Option<Vec<u8>>, hold: Duration) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 4096];
        let _ = s.read(&mut buf);
        if let Some(r) = reply {
            let _ = s.write_all(&r);
        }
        std::thread::sleep(hold);
    });
    url
}

#[test]
fn client_bounds_time_and_size() {
    let d = digest("x");
    let url = one_shot(None, Duration::from_secs(5));
    let started = std::time::Instant::now();
    let e = Client::new(Duration::from_millis(500))
        .timestamp(&url, &d)
        .unwrap_err();
    assert!(matches!(e, ClientError::Transport { .. }), "{e}");
    assert!(started.elapsed() < Duration::from_secs(4));

    let big = 2 << 20;
    let mut reply =
        format!("HTTP/1.1 200 OK\r\nContent-Type: application/timestamp-reply\r\nContent-Length: {big}\r\n\r\n").into_bytes();
    reply.resize(reply.len() + big, 0x30);
    let e = client()
        .timestamp(&one_shot(Some(reply), Duration::from_secs(3)), &d)
        .unwrap_err();
    assert!(matches!(e, ClientError::TooLarge { .. }), "{e}");

    let html =
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 2\r\n\r\nhi".to_vec();
    let e = client()
        .timestamp(&one_shot(Some(html), Duration::from_secs(3)), &d)
        .unwrap_err();
    assert!(matches!(e, ClientError::ContentType { .. }), "{e}");
}
