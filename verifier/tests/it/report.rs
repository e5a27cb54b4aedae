//! The evidence report (`--html`, `--pdf`) as a person sees it: written by the real
//! `afr-verify` binary, rendered by a real headless Chromium (Debian's `chromium`, installed by
//! `scripts/setup.sh`), asserted on the DOM Chromium built, and photographed.
//!
//! - the demo's incident (`docs/examples/incident.jsonl`) recorded in a real store, anchored on
//!   a real anvil, verified with `--rpc`: verified, then with one payload byte flipped:
//!   tampered;
//! - a named tampered vector of `testdata/`, offline;
//! - a hostile bundle of 10,000 events whose strings are markup, 1 MiB long or terminal and
//!   bidirectional controls: no script or image in the DOM, the title unchanged, the size
//!   bounded;
//! - a case of two recorders linked by the real delegation handshake;
//! - the errors: no renderer, an unwritable report.
//!
//! With `AFR_REPORT_SCREENSHOTS=DIR` (relative to the workspace), the screenshots are also
//! written to `DIR` (`incident.png`, `tampered.png`, `case.png`): how `docs/report/` is made,
//! `AFR_REPORT_SCREENSHOTS=docs/report cargo test -p afr-verify --test it report::`.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use afr_core::{Hash32, bundle::Bundle};
use afr_eval::tamper::{History, Rng};
use afr_recorder::{Config, Recorder};
use afr_testkit::anvil;
use afr_verify::anchors::Anchors;
use serde_json::{Value, json};

use super::anvil::{anchor_batch, deploy_canonical};

const ADDR: &str = afr_testkit::DEV_ADDR;
const KEY_B: &str = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
const ADDR_B: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";
const INCIDENT: &str = include_str!("../../../docs/examples/incident.jsonl");

/// The headless Chromium the tests render with; fails the test naming the script that
/// installs it.
fn chromium() -> PathBuf {
    if let Some(p) = std::env::var_os("AFR_CHROMIUM") {
        return afr_testkit::installed(Path::new(&p), "scripts/setup.sh (Debian's chromium)");
    }
    let found = ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|n| {
            std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
                .map(move |d| d.join(n))
                .collect::<Vec<_>>()
        })
        .find(|p| p.is_file());
    match found {
        Some(p) => p,
        None => panic!(
            "headless Chromium missing (chromium, chromium-browser or google-chrome on PATH, or \
             AFR_CHROMIUM): run scripts/setup.sh, which installs Debian's chromium"
        ),
    }
}

/// Runs headless Chromium on `page` with `args`, its profile in `dir`; returns stdout.
fn render(dir: &Path, page: &Path, args: &[&str]) -> Vec<u8> {
    let profile = dir.join(format!(
        "profile-{}",
        page.file_stem().unwrap().to_string_lossy()
    ));
    let out = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "chromium {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(profile);
    out.stdout
}

/// The DOM Chromium built from `page`, serialized.
fn dom(dir: &Path, page: &Path) -> String {
    String::from_utf8(render(dir, page, &["--dump-dom"])).unwrap()
}

/// The text of a serialized DOM as a reader sees it: style contents and tags dropped (block
/// elements as a space), the five character references decoded, white space collapsed.
pub(crate) fn text(dom: &str) -> String {
    const INLINE: [&str; 8] = ["code", "b", "span", "a", "i", "em", "strong", "br"];
    let mut dom = dom.to_owned();
    while let (Some(a), Some(b)) = (dom.find("<style>"), dom.find("</style>")) {
        dom.replace_range(a..b + "</style>".len(), "");
    }
    let mut out = String::with_capacity(dom.len());
    let mut rest = dom.as_str();
    while let Some(i) = rest.find('<') {
        out.push_str(&rest[..i]);
        let Some(j) = rest[i..].find('>') else { break };
        let name: String = rest[i + 1..i + j]
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        if !INLINE.contains(&name.as_str()) || name == "br" {
            out.push(' ');
        }
        rest = &rest[i + j + 1..];
    }
    out.push_str(rest);
    let out = out
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&nbsp;", " ")
        .replace("&amp;", "&");
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Asserts that the text `t` of a report says `what`, showing the text's beginning if not.
#[track_caller]
fn says(t: &str, what: &str) {
    assert!(t.contains(what), "{}", &t[..t.len().min(3000)]);
}

/// The document title in a serialized DOM.
fn title(dom: &str) -> String {
    let start = dom.find("<title>").unwrap() + "<title>".len();
    let end = start + dom[start..].find("</title>").unwrap();
    dom[start..end].to_owned()
}

/// A screenshot of `page` (1280×1800, no device scale) at `png`; checks it is one, of a
/// plausible size, and copies it to `$AFR_REPORT_SCREENSHOTS/name` when that is set.
fn screenshot(dir: &Path, page: &Path, name: &str) {
    let png = dir.join(name);
    render(
        dir,
        page,
        &[
            &format!("--screenshot={}", png.display()),
            "--window-size=1280,1800",
            "--force-device-scale-factor=1",
        ],
    );
    let b = std::fs::read(&png).unwrap();
    assert!(b.starts_with(b"\x89PNG\r\n\x1a\n"), "{name} is not a PNG");
    assert!(
        (20_000..2_000_000).contains(&b.len()),
        "{name}: {} bytes",
        b.len()
    );
    if let Some(out) = std::env::var_os("AFR_REPORT_SCREENSHOTS") {
        // A relative directory is the workspace's (tests run in the crate's directory).
        let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(out);
        std::fs::create_dir_all(&out).unwrap();
        std::fs::copy(&png, out.join(name)).unwrap();
    }
}

/// Runs `afr-verify ARGS` in `dir` (the report names files as given), with `AFR_CHROMIUM`
/// pointing at the tests' Chromium; returns the exit code, stdout and stderr.
fn afr_verify(dir: &Path, args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    afr_verify_with(dir, &chromium(), args)
}

/// [`afr_verify`] with `AFR_CHROMIUM` set to `chromium`.
fn afr_verify_with(
    dir: &Path,
    chromium: &Path,
    args: &[&std::ffi::OsStr],
) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_afr-verify"))
        .current_dir(dir)
        .env("AFR_CHROMIUM", chromium)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn os(args: &[&str]) -> Vec<std::ffi::OsString> {
    args.iter().map(std::ffi::OsString::from).collect()
}

fn refs(a: &[std::ffi::OsString]) -> Vec<&std::ffi::OsStr> {
    a.iter().map(|s| s.as_os_str()).collect()
}

fn addr(s: &str) -> [u8; 20] {
    afr_verify::parse_addr(s, "address").unwrap()
}

/// A recorder in `dir` for `recorder`, epochs of 100 events.
fn recorder(dir: &Path, recorder: &str) -> Recorder {
    afr_recorder::init(dir, addr(recorder)).unwrap();
    Recorder::open(dir, Config::with_epoch_size(100)).unwrap()
}

fn event(line: &str) -> afr_core::EventInput {
    afr_core::EventInput::from_json(line.as_bytes(), 1 << 20).unwrap()
}

fn roots(b: &Bundle) -> Vec<Hash32> {
    b.headers.iter().map(|h| h.root()).collect()
}

#[test]
fn incident_report_verified_then_tampered_on_a_real_chain() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // The demo's incident, recorded, sealed and disclosed with its keys by a real recorder
    // whose anchoring identity is anvil's first dev account.
    let r = recorder(&dir.join("afr"), ADDR);
    let lines: Vec<&str> = INCIDENT.lines().filter(|l| !l.trim().is_empty()).collect();
    for l in &lines {
        r.record(event(l)).unwrap();
    }
    r.seal().unwrap();
    let seqs: Vec<u64> = (0..lines.len() as u64).collect();
    let bundle = r.disclose(&seqs, true).unwrap();
    drop(r);
    std::fs::write(dir.join("incident.bundle"), bundle.encode()).unwrap();

    // Its epoch roots anchored at the canonical AfrAnchor address by the recorder's own key.
    let chain = anvil();
    let url = chain.url.as_str();
    deploy_canonical(url);
    let contract = afr_core::deployment::ANCHOR_ADDRESS;
    anchor_batch(url, contract, &roots(&bundle), 0);

    // Run in the directory of the files, named as a reader would name them.
    let pinned = |file: &str, extra: &[&str]| {
        let mut a = vec![
            "bundle",
            file,
            "--rpc",
            url,
            "--chain-id",
            "31337",
            "--recorder",
            ADDR,
        ];
        a.extend(extra);
        afr_verify(dir, &refs(&os(&a)))
    };
    let (code, stdout, stderr) = pinned(
        "incident.bundle",
        &["--html", "incident.html", "--pdf", "incident.pdf", "--json"],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["outcome"], "verified");
    for f in ["incident.html", "incident.pdf"] {
        assert!(
            stderr.contains(&format!("report written to {f}")),
            "{stderr}"
        );
    }
    let (html, pdf) = (dir.join("incident.html"), dir.join("incident.pdf"));
    let pdf_bytes = std::fs::read(&pdf).unwrap();
    assert!(pdf_bytes.starts_with(b"%PDF"), "not a PDF");
    assert!(pdf_bytes.len() > 10_000, "PDF of {} bytes", pdf_bytes.len());

    // What a reader sees.
    let d = dom(dir, &html);
    let t = text(&d);
    assert!(title(&d).starts_with("VERIFIED"), "{}", title(&d));
    says(&t, "VERIFIED");
    says(&t, "7 disclosed events: 7 opened");
    says(&t, "Events (7 disclosed events)");
    for tool in [
        "read_file",
        "search_runbooks",
        "psql",
        "request_approval",
        "delegate_task",
        "pagerduty.trigger",
    ] {
        assert!(t.contains(tool), "{tool} missing");
    }
    assert!(t.contains("DROP SCHEMA billing CASCADE"));
    assert!(t.contains("ESCALATE"), "the guardrail's verdict");
    assert!(
        t.contains("UNSIGNED"),
        "the approval is the operator's word"
    );
    says(&t, "error: billing API returning 500");
    assert!(t.contains("(the canonical AfrAnchor address)"));
    // An anchors row: chain, contract, epoch, root, the transaction the verifier proved it
    // by, its block and log index.
    let anchor = &v["anchors"][0];
    let c = contract.to_ascii_lowercase();
    let row = format!(
        "31337 {}…{} 0 {} {} {} {}",
        &c[..6],
        &c[38..],
        v["epoch_roots"][0]["root"].as_str().unwrap(),
        anchor["tx"].as_str().unwrap(),
        anchor["block"],
        anchor["log_index"]
    );
    assert!(t.contains(&row), "{row}: {}", &t[..t.len().min(3000)]);
    // The delegation graph: approval 3 -> delegate_task 4 -> psql 5, in one log.
    assert!(d.contains("class=\"graph\""), "no delegation graph");
    assert!(t.contains("parent_event"));
    // How to re-verify, with the pins and no more.
    says(
        &t,
        &format!(
            "afr-verify bundle incident.bundle --chain-id 31337 --recorder {ADDR} --rpc {url}"
        ),
    );
    assert!(!d.contains("<script") && !d.contains("<img"));
    screenshot(dir, &html, "incident.png");

    // One byte of the psql DROP's sealed payload flipped: tampered at that event.
    let mut bad = bundle.clone();
    bad.events[5].payload.as_mut().unwrap().ciphertext[3] ^= 1;
    std::fs::write(dir.join("incident-tampered.bundle"), bad.encode()).unwrap();
    let (code, stdout, stderr) = pinned("incident-tampered.bundle", &["--html", "tampered.html"]);
    let bad_html = dir.join("tampered.html");
    assert_eq!(code, 1, "{stdout}{stderr}");
    let d = dom(dir, &bad_html);
    let t = text(&d);
    assert!(title(&d).starts_with("TAMPERED"), "{}", title(&d));
    says(&t, "The payload-commitment check failed at event 5");
    assert!(t.contains("Consistent with: payload edit or swapped ciphertext"));
    says(&t, "5 opened, 0 withheld, 0 erased, 1 failed");
    assert!(
        t.contains("The first failure is here: the payload-commitment check failed"),
        "the card of event 5"
    );
    screenshot(dir, &bad_html, "tampered.png");
}

#[test]
fn testdata_reports_of_a_tampered_bundle_and_an_honest_log() {
    let tmp = tempfile::tempdir().unwrap();
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let pins = [
        "--anchors",
        "anchors.json",
        "--chain-id",
        "31337",
        "--recorder",
        "0xa1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1",
        // The catalogue's anchors file is version 2: taken as it is.
        "--unproven-anchors",
    ];
    let run = |kind: &str, file: &str, html: &Path| {
        let mut a = os(&[kind, file]);
        a.extend(os(&pins));
        a.extend(os(&["--html"]));
        a.push(html.into());
        afr_verify(&data, &refs(&a))
    };
    // A bundle whose record was edited: the first failure, named and explained.
    let html = tmp.path().join("edit.html");
    let (code, stdout, stderr) = run("bundle", "matrix-bundle-edit-record.bundle", &html);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stdout.starts_with("TAMPERED\n"),
        "stdout unchanged: {stdout}"
    );
    let d = dom(tmp.path(), &html);
    let t = text(&d);
    assert!(t.contains("TAMPERED"));
    says(&t, "The inclusion-proof check failed at event 1");
    says(&t, "Consistent with: edit, insertion or splice");
    assert!(t.contains("not compared: checking stopped at the first failure"));
    says(
        &t,
        &format!(
            "afr-verify bundle matrix-bundle-edit-record.bundle --chain-id 31337 --recorder {} --anchors anchors.json --unproven-anchors",
            pins[5]
        ),
    );
    // A whole log: verified, every epoch's anchor, and its records on the timeline and as
    // cards, their payloads sealed.
    let html = tmp.path().join("log.html");
    let (code, stdout, stderr) = run("log", "honest-log.afr", &html);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let d = dom(tmp.path(), &html);
    let t = text(&d);
    assert!(title(&d).starts_with("VERIFIED"), "{}", title(&d));
    assert!(t.contains("Evidence report: whole-log export honest-log.afr"));
    says(&t, "12 events on 1 row.");
    says(&t, "Records (12 records)");
    says(
        &t,
        "Payload sealed: not opened (a whole-log export carries no keys)",
    );
    assert_eq!(d.matches("class=\"card\"").count(), 12);
    says(&t, "TRUSTED the anchors file anchors.json");
}

#[test]
fn log_report_shows_its_records_within_the_bounds() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // 6,000 records: more than the timeline's 5,000 marks and the 1,000 cards.
    let (log, roots) = super::honest_log(1500);
    std::fs::write(dir.join("big.afr"), &log).unwrap();
    super::anchors_file(dir, "anchors.json", &roots);
    let rec = format!("0x{}", hex::encode(super::RECORDER));
    let args = os(&[
        "log",
        "big.afr",
        "--anchors",
        "anchors.json",
        "--unproven-anchors",
        "--chain-id",
        "31337",
        "--recorder",
        &rec,
        "--html",
        "big.html",
    ]);
    let (code, stdout, stderr) = afr_verify(dir, &refs(&args));
    assert_eq!(code, 0, "{stdout}{stderr}");
    let raw = std::fs::read_to_string(dir.join("big.html")).unwrap();
    let t = text(&raw);
    // The timeline: every other record, and the last, and it says so.
    says(
        &t,
        "3001 events on 1 row. 2999 more records are not on the timeline (at most 5000 marks): \
         one record in every 2 is drawn, evenly spaced from the first, and the last.",
    );
    assert_eq!(raw.matches("<g><title>event ").count(), 3001);
    assert!(raw.contains("<title>event 5999 · api"), "the last record");
    assert!(!raw.contains("<title>event 5997 · api"), "an odd one");
    // The cards: the first 500 and the last 500, and it says so.
    says(&t, "Records (6000 records)");
    says(
        &t,
        "5000 more records are not shown as cards (at most 1000 cards in one report: \
         the first 500 records and the last 500 are shown)",
    );
    assert_eq!(raw.matches("<article class=\"card\"").count(), 1000);
    for (id, shown) in [
        ("e0-0", true),
        ("e0-499", true),
        ("e0-500", false),
        ("e0-5499", false),
        ("e0-5500", true),
        ("e0-5999", true),
    ] {
        assert_eq!(raw.contains(&format!("id=\"{id}\"")), shown, "{id}");
    }
    // A card: sequence number, category, time, epoch, lane, leaf hash; its payload sealed.
    let mut r = afr_core::export::LogReader::new(&log);
    let leaf = loop {
        if let Some(afr_core::export::Frame::Event { record_bytes, .. }) = r.next_frame().unwrap() {
            break afr_core::hash::leaf_hash(record_bytes);
        }
    };
    says(&t, "Event 0 · api 1970-01-01T00:00:00");
    says(
        &t,
        &format!("UTC · epoch 0 · lane — · payload sealed · leaf {leaf}"),
    );
    says(
        &t,
        "Payload sealed: not opened (a whole-log export carries no keys)",
    );
    assert!(raw.len() < 4 << 20, "report of {} bytes", raw.len());
}

#[test]
fn hostile_bundle_renders_inert_and_bounded() {
    const HOSTILE: [&str; 5] = [
        "<script>document.title='pwned'</script>",
        "\"><img src=x onerror=alert(1)>",
        "</style><style>body{display:none}</style>",
        "\u{1b}[2K\rVERIFIED \u{202e}gnp.exe\u{2066}",
        "<svg onload=alert(1)><a href=\"javascript:alert(1)\">x</a>",
    ];
    let rec = [0xc3; 20];
    let mut h = History::random(&mut Rng::new(5), rec);
    let template = h.epochs[0][0].clone();
    let huge = format!("{}{}", HOSTILE[0], "A".repeat(1 << 20));
    h.epochs = (0..100u64)
        .map(|e| {
            (0..100u64)
                .map(|i| {
                    let n = e * 100 + i;
                    let hostile = HOSTILE[(n % 5) as usize];
                    let mut ev = template.clone();
                    ev.timestamp_us = 1_764_000_000_000_000 + n * 1_000_000;
                    let long = n % 3_000 == 7;
                    ev.set_intent(
                        &format!("{hostile}{n}"),
                        json!({"q": if long { huge.as_str() } else { hostile }, "n": n}),
                    );
                    ev.payload.execution = Some(afr_core::event::Execution {
                        command: if long {
                            huge.clone()
                        } else {
                            hostile.to_owned()
                        },
                        target: Some(hostile.to_owned()),
                        mutation: Value::Null,
                    });
                    ev.payload.effects = Some(afr_core::event::Effects {
                        error: (n % 7 == 0).then(|| hostile.to_owned()),
                        state_changes: vec![hostile.to_owned(); 30],
                        ..Default::default()
                    });
                    ev
                })
                .collect()
        })
        .collect();
    let log = h.seal();
    let bundle = log.bundle(&log.positions());
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("hostile.bundle");
    std::fs::write(&file, bundle.encode()).unwrap();
    let anchors = Anchors::assumed(
        31337,
        afr_core::deployment::ANCHOR_ADDRESS,
        &rec,
        &log.roots(),
        9,
    );
    let anchors_file = tmp.path().join("anchors.json");
    std::fs::write(&anchors_file, serde_json::to_string(&anchors).unwrap()).unwrap();
    let html = tmp.path().join("hostile.html");
    let mut a = os(&["bundle"]);
    a.push(file.into());
    a.extend(os(&["--anchors"]));
    a.push(anchors_file.into());
    a.extend(os(&["--unproven-anchors"]));
    a.extend(os(&[
        "--chain-id",
        "31337",
        "--recorder",
        &format!("0x{}", hex::encode(rec)),
    ]));
    a.extend(os(&["--html"]));
    a.push(html.clone().into());
    let (code, stdout, stderr) = afr_verify(tmp.path(), &refs(&a));
    assert_eq!(code, 0, "{}{stderr}", &stdout[..stdout.len().min(2000)]);

    let raw = std::fs::read_to_string(&html).unwrap();
    eprintln!(
        "a 10,000-event hostile bundle: report of {} bytes",
        raw.len()
    );
    assert!(raw.len() < 10 << 20, "report of {} bytes", raw.len());
    let lower = raw.to_ascii_lowercase();
    assert!(!lower.contains("<script"), "an unescaped <script");
    assert!(!lower.contains("<img"), "an unescaped <img");
    assert!(!lower.contains("href=\"javascript"), "a javascript: link");
    assert_eq!(
        lower.matches("<style").count(),
        1,
        "one style element, ours"
    );
    assert_eq!(lower.matches("</style").count(), 1);
    assert!(
        !raw.contains(['\u{1b}', '\u{202e}', '\u{2066}', '\r']),
        "a raw control or bidirectional character"
    );
    assert!(raw.contains("bytes more)"), "long strings are cut");

    let d = dom(tmp.path(), &html);
    assert!(
        !d.contains("<script") && !d.contains("<img"),
        "script or img in the DOM"
    );
    // No element Chromium built carries an event handler or a script URL.
    for tag in d
        .split('<')
        .skip(1)
        .filter_map(|t| t.split_once('>').map(|t| t.0))
    {
        let tag = tag.to_ascii_lowercase();
        assert!(
            !tag.contains("onerror") && !tag.contains("onload") && !tag.contains("javascript:"),
            "{tag}"
        );
    }
    assert_eq!(
        title(&d),
        format!(
            "VERIFIED: AFR evidence report, disclosure bundle {}",
            tmp.path().join("hostile.bundle").display()
        )
    );
    let t = text(&d);
    assert!(
        t.contains("10000 disclosed events: 10000 opened"),
        "{}",
        &t[..2000]
    );
    assert!(
        t.contains("9000 more events are not shown as cards"),
        "cards bounded"
    );
    assert!(
        t.contains("5000 more events are not on the timeline"),
        "timeline bounded"
    );
    assert!(t.contains("\\u{202e}gnp.exe"), "bidi shown as an escape");
}

/// Signs a 32-byte digest with a secp256k1 key: `r ‖ s ‖ v`.
fn signer(key: &'static str) -> impl Fn(&[u8; 32]) -> Result<[u8; 65], String> + Sync {
    move |digest| {
        let raw = hex::decode(key.trim_start_matches("0x")).map_err(|e| e.to_string())?;
        let sk = k256::ecdsa::SigningKey::from_slice(&raw).map_err(|e| e.to_string())?;
        let (sig, recid) = sk
            .sign_prehash_recoverable(digest)
            .map_err(|e| e.to_string())?;
        let mut s = [0u8; 65];
        s[..64].copy_from_slice(&sig.to_bytes());
        s[64] = 27 + recid.to_byte();
        Ok(s)
    }
}

#[test]
fn case_report_shows_each_party_and_the_delegation_graph() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (sign_a, sign_b) = (signer(afr_testkit::DEV_KEY), signer(KEY_B));
    let a = recorder(&dir.join("a"), ADDR);
    let b = recorder(&dir.join("b"), ADDR_B);
    // Now, less a minute: the recorder dates its own `afr.delegated` event by its clock.
    let t0 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
        - 60_000_000;
    let ev = |category: &str, lane: &str, tool: &str, ts: u64, extra: Value| {
        let mut v = json!({"category": category, "timestamp_us": ts, "lane": lane,
                           "intent": {"tool": tool, "args": {"ticket": "INC-7"}}});
        if let (Value::Object(m), Value::Object(x)) = (&mut v, extra) {
            m.extend(x);
        }
        event(&v.to_string())
    };
    a.record(ev("retrieval", "planner", "read_ticket", t0, json!({})))
        .unwrap();
    let hand_off = ev(
        "delegation",
        "planner",
        "hand_off",
        t0 + 1_000_000,
        json!({"delegation_provenance": {"organisation": "Acme Corp", "delegating_agent": "planner"}}),
    );
    let offer = a
        .delegate_offer(hand_off, &b.recorder_id(), None, &sign_a)
        .unwrap();
    let run_job = ev(
        "shell",
        "worker",
        "run_job",
        t0 + 2_000_000,
        json!({"execution": {"command": "./migrate.sh --ticket INC-7", "target": "billing-db"},
               "effects": {"state_changes": ["migrated 3 tables"]}}),
    );
    let accepted = b.delegate_accept(run_job, &offer, None, &sign_b).unwrap();
    a.delegate_receipt(&offer, &accepted, &sign_a).unwrap();
    for r in [&a, &b] {
        r.seal().unwrap();
    }
    let mut parties = String::from("chain_id = 31337\n");
    for (name, r, file, n) in [
        ("Acme Corp (delegating)", &a, "acme", 3u64),
        ("Globex (receiving)", &b, "globex", 1),
    ] {
        let bundle = r.disclose(&(0..n).collect::<Vec<_>>(), true).unwrap();
        std::fs::write(dir.join(format!("{file}.bundle")), bundle.encode()).unwrap();
        let mut anchors = Anchors::assumed(
            31337,
            afr_core::deployment::ANCHOR_ADDRESS,
            &r.recorder_id(),
            &roots(&bundle),
            9,
        );
        for p in anchors.roots.values_mut() {
            p.block_time = Some(t0 / 1_000_000 + 600);
        }
        std::fs::write(
            dir.join(format!("{file}.anchors.json")),
            serde_json::to_string(&anchors).unwrap(),
        )
        .unwrap();
        parties.push_str(&format!(
            "[[party]]\nname = {}\nrecorders = [\"0x{}\"]\nbundles = [\"{file}.bundle\"]\nanchors = [\"{file}.anchors.json\"]\n",
            serde_json::to_string(name).unwrap(),
            hex::encode(r.recorder_id())
        ));
    }
    drop((a, b));
    std::fs::write(dir.join("case.toml"), parties).unwrap();
    // Version-2 anchors files (roots assumed anchored): taken as they are.
    let args = os(&[
        "case",
        "case.toml",
        "--unproven-anchors",
        "--html",
        "case.html",
    ]);
    let (code, stdout, stderr) = afr_verify(dir, &refs(&args));
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.starts_with("CASE VERIFIED\n"), "{stdout}");
    let html = dir.join("case.html");
    let d = dom(dir, &html);
    let t = text(&d);
    assert!(title(&d).starts_with("CASE VERIFIED"), "{}", title(&d));
    // Each party's verdict.
    says(&t, "Party “Acme Corp (delegating)”: VERIFIED");
    says(&t, "Party “Globex (receiving)”: VERIFIED");
    // The delegation graph across the two recorders: its nodes and verified links.
    assert!(d.contains("class=\"graph\""));
    for node in ["hand_off", "run_job", "event 1", "event 0"] {
        assert!(t.contains(node), "{node} missing");
    }
    assert!(t.contains("delegated_to: verified") || t.contains("parent_event: verified"));
    says(&t, "afr-verify case case.toml");
    screenshot(dir, &html, "case.png");
}

#[test]
fn report_errors_are_io_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let bundle = data.join("honest-bundle.bundle");
    // An unwritable report: exit 74, the verdict still printed.
    let mut a = os(&["bundle"]);
    a.push(bundle.clone().into());
    a.extend(os(&["--html", "/nonexistent/dir/report.html"]));
    let (code, stdout, stderr) = afr_verify(tmp.path(), &refs(&a));
    assert_eq!(code, 74, "{stdout}{stderr}");
    assert!(stdout.starts_with("INCOMPLETE\n"), "{stdout}");
    assert!(
        stderr.contains("cannot write /nonexistent/dir/report.html"),
        "{stderr}"
    );
    // No renderer: exit 74, saying what to install and that --html then a browser will do.
    let mut a = os(&["bundle"]);
    a.push(bundle.into());
    a.extend(os(&["--pdf"]));
    a.push(tmp.path().join("r.pdf").into());
    let no_chromium = tmp.path().join("no-such-chromium");
    let (code, _, stderr) = afr_verify_with(tmp.path(), &no_chromium, &refs(&a));
    assert_eq!(code, 74, "{stderr}");
    assert!(
        stderr.contains("apt-get install chromium") && stderr.contains("--html FILE"),
        "{stderr}"
    );
    assert!(!tmp.path().join("r.pdf").exists());
}
