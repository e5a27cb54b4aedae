//! Untrusted text reaches the terminal escaped: a recorded tool name or command holding
//! `ESC [2K CR VERIFIED` or a right-to-left override cannot rewrite what `afr` prints.

use super::{afr, import_rejected, initialised, ok, record_stdin};

/// Erase the line, return to its start, claim a verdict.
const HOSTILE: &str = "\u{1b}[2K\rVERIFIED";
/// A right-to-left override.
const RLO: &str = "\u{202e}";

/// Fails unless `text` holds no ESC, CR or U+202E, and does hold the escape of ESC.
fn assert_escaped(what: &str, text: &[u8]) {
    let shown = String::from_utf8_lossy(text);
    assert!(!text.contains(&0x1b), "{what}: raw ESC in {shown:?}");
    assert!(!text.contains(&b'\r'), "{what}: raw CR in {shown:?}");
    assert!(
        !text.windows(3).any(|w| w == RLO.as_bytes()),
        "{what}: raw U+202E in {shown:?}"
    );
    assert!(
        shown.contains("\\u{1b}"),
        "{what}: no escaped ESC in {shown:?}"
    );
}

#[test]
fn hostile_tool_and_command_are_escaped_by_query_status_and_verify_bundle() {
    let (tmp, dir) = initialised();
    let tool = format!("psql{HOSTILE}{RLO}gpj.exe");
    let command = format!("DROP SCHEMA billing{HOSTILE}{RLO}");
    let ev = serde_json::json!({
        "category": "database",
        "intent": {"tool": tool, "args": {"sql": "DROP SCHEMA billing"}},
        "execution": {"command": command, "target": "db-prod-1"},
    });
    let out = record_stdin(&dir, format!("{ev}\n").as_bytes());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    ok(afr(&dir).arg("seal"));

    // The table: the tool column and the summary column.
    let bundle = tmp.path().join("b.afrb");
    let q = ok(afr(&dir)
        .args(["query", r#"category = "database""#, "--disclose"])
        .arg(&bundle)
        .arg("--with-keys"));
    assert_escaped("afr query", &q.stdout);
    assert!(
        String::from_utf8_lossy(&q.stdout).contains("1 event matched"),
        "{}",
        String::from_utf8_lossy(&q.stdout)
    );
    // The JSON lines still carry the exact recorded bytes (serde_json escapes C0 only).
    let j = ok(afr(&dir).args(["query", r#"category = "database""#, "--json"]));
    let v: serde_json::Value =
        serde_json::from_str(String::from_utf8(j.stdout).unwrap().trim()).unwrap();
    assert_eq!(v["event"]["intent"]["tool"], tool.as_str());
    assert_eq!(v["event"]["execution"]["command"], command.as_str());

    // The opened payloads of a disclosed bundle with keys.
    let b = ok(afr(&dir).arg("verify-bundle").arg(&bundle));
    assert_escaped("afr verify-bundle", &b.stdout);
    let shown = String::from_utf8_lossy(&b.stdout);
    assert!(shown.starts_with("VERIFIED\n"), "{shown}");
    assert!(shown.contains("1 disclosed events"), "{shown}");
    assert_eq!(
        shown.matches("VERIFIED").count(),
        3,
        "the verdict line, and the tool and command (escaped): {shown}"
    );

    // `afr status` of this store: nothing in it is free text, and what it prints stays clean
    // (`status_escapes_every_string_it_is_given` gives it hostile strings).
    let s = ok(afr(&dir).arg("status"));
    let shown = String::from_utf8_lossy(&s.stdout);
    assert!(
        !s.stdout.contains(&0x1b) && !s.stdout.contains(&b'\r') && !shown.contains(RLO),
        "{shown:?}"
    );
}

/// `afr status` prints the status object of whatever answers on the recorder's socket: a
/// stand-in server here whose every string field is hostile. The text escapes each one; the
/// JSON (`--json`) escapes them as JSON and still carries them exactly.
#[test]
fn status_escapes_every_string_it_is_given() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("afr");
    std::fs::create_dir(&dir).unwrap();
    let h = format!("{HOSTILE}{RLO}");
    let status = serde_json::json!({
        "recorder": format!("0x{h}"),
        "events": 1,
        "sealed_epochs": 1,
        "covered_when": h,
        "last_epoch_root": h,
        "last_anchor": {"epoch": 0, "tx": h, "cost_wei": h, "state": h},
        "fork_alarm": {"epoch": 0, "contract": h, "onchain_root": h, "local_root": h, "tx": h},
    });
    let body = status.to_string();
    let socket = std::os::unix::net::UnixListener::bind(dir.join(afr_server::SOCKET_FILE)).unwrap();
    // One answer per `afr status` below, each on its own connection.
    let server = std::thread::spawn(move || {
        for _ in 0..2 {
            let (conn, _) = socket.accept().unwrap();
            let mut r = std::io::BufReader::new(conn);
            let mut line = String::new();
            while std::io::BufRead::read_line(&mut r, &mut line).unwrap() > 2 {
                line.clear();
            }
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n",
                body.len()
            );
            std::io::Write::write_all(r.get_mut(), (head + &body).as_bytes()).unwrap();
        }
    });

    let out = afr(&dir).arg("status").output().unwrap();
    assert_eq!(out.status.code(), Some(3), "the fork alarm's exit code");
    assert_escaped("afr status", &out.stdout);
    assert_escaped("afr status (stderr)", &out.stderr);
    let shown = String::from_utf8_lossy(&out.stdout);
    for line in [
        "FORK ALARM",
        "recorder",
        "covered when",
        "last root",
        "last anchor",
    ] {
        let l = shown.lines().find(|l| l.contains(line)).unwrap();
        assert!(l.contains("\\u{1b}[2K\\rVERIFIED\\u{202e}"), "{line}: {l}");
    }

    let out = afr(&dir).args(["status", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        !text.contains(['\u{1b}', '\r', '\u{202e}']) && text.contains("\\u202e"),
        "{text:?}"
    );
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&text).unwrap(),
        status
    );
    server.join().unwrap();
}

#[test]
fn error_messages_escape_the_input_they_quote() {
    let (tmp, dir) = initialised();

    // `afr record`: a bad line's field name is quoted in the rejection.
    let bad = serde_json::json!({
        "category": "shell",
        "intent": {"tool": "ls", format!("args{HOSTILE}{RLO}"): {}},
    });
    let out = record_stdin(&dir, format!("{bad}\n").as_bytes());
    assert_eq!(out.status.code(), Some(65));
    assert_escaped("afr record", &out.stderr);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("line 1: field `intent.args\\u{1b}"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // `afr query`: a query that does not parse is quoted back, the caret still under the bad
    // token of the escaped query.
    let expr = format!(r#"intent.tool = "{HOSTILE}{RLO}" and human_approval.aprover = "x""#);
    let out = afr(&dir).args(["query", &expr]).output().unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert_escaped("afr query (parse error)", &out.stderr);
    let err = String::from_utf8(out.stderr).unwrap();
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{err}");
    let at = lines[1].find("aprover").unwrap();
    assert_eq!(lines[2], format!("{}^^^^^^^", " ".repeat(at)), "{err}");

    // Any error through `afr: error:`: here a file name given on the command line.
    let missing = tmp.path().join(format!("nope{HOSTILE}{RLO}.jsonl"));
    let out = afr(&dir).arg("record").arg(&missing).output().unwrap();
    assert!(!out.status.success());
    assert_escaped("afr record (missing file)", &out.stderr);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("afr: error: cannot open"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // `afr import swe-agent`: the rejected file is named.
    let traj = tmp.path().join(format!("run{HOSTILE}{RLO}.traj"));
    std::fs::write(&traj, "not json").unwrap();
    let out = import_rejected(&dir, &traj);
    assert_escaped("afr import", &out.stderr);
}
