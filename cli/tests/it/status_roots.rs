//! `afr status` reports the independent roots (issue #32): the latest signed checkpoint, the
//! size each witness last cosigned, the timestamp tokens, and the compromise window per root,
//! after `afr witness` ran against one real `afr witness serve`.

use std::{path::Path, process::Command, time::Duration};

use afr_recorder::{Config, Recorder};
use afr_testkit::shell_event;

use super::{afr, initialised, ok, proc::Daemon, status_json};

/// A running `afr witness serve`: the process, its URL and its vkey.
struct Witness {
    _daemon: Daemon,
    url: String,
    vkey: String,
}

fn witness(tmp: &Path, name: &str, log_vkey: &str) -> Witness {
    let key = tmp.join(format!("{name}.key"));
    let serve = |c: &mut Command| {
        c.args(["witness", "serve", "--key"]).arg(&key).args([
            "--init",
            "--name",
            &format!("witness.test/{name}"),
        ]);
    };
    let mut c = afr(tmp);
    serve(&mut c);
    let vkey = String::from_utf8(ok(c.arg("--print-vkey")).stdout)
        .unwrap()
        .trim()
        .to_owned();
    let mut c = afr(tmp);
    serve(&mut c);
    c.args(["--log", log_vkey, "--state"])
        .arg(tmp.join(format!("{name}-state")))
        .args(["--listen", "127.0.0.1:0"]);
    let mut daemon = Daemon::spawn(&mut c);
    let addr = daemon
        .wait_for(|l| l.split("listening on http://").nth(1).map(str::to_owned))
        .unwrap_or_else(|| panic!("witness {name} did not start: {}", daemon.stderr()));
    Witness {
        _daemon: daemon,
        url: format!("http://{addr}"),
        vkey,
    }
}

fn record(dir: &Path, n: usize, tag: &str) {
    let r = Recorder::open(dir, Config::with_epoch_size(10)).unwrap();
    for i in 0..n {
        r.record(shell_event(&format!("{tag}-{i}"))).unwrap();
    }
}

#[test]
fn status_reports_checkpoints_witnesses_and_the_window_per_root() {
    let (tmp, dir) = initialised();
    let tmp = tmp.path().to_owned();
    record(&dir, 25, "a");

    // Before `afr witness`: no checkpoint, no witness; no root but the chain, unused too.
    let v = status_json(&dir);
    let r = &v["roots"];
    assert!(r["latest_checkpoint"].is_null(), "{r}");
    assert_eq!(r["witnesses"], serde_json::json!({}), "{r}");
    assert_eq!(r["timestamp_tokens"], 0, "{r}");
    for root in ["chain", "witnesses", "witnesses_all", "tsa"] {
        assert!(r["window_s"][root].is_null(), "{root}: {r}");
    }

    let log_vkey = String::from_utf8(ok(afr(&dir).args(["witness", "--print-vkey"])).stdout)
        .unwrap()
        .trim()
        .to_owned();
    let w1 = witness(&tmp, "w1", &log_vkey);
    let policy = tmp.join("witnesses.policy");
    std::fs::write(
        &policy,
        format!("witness w1 {} {}\nquorum w1\n", w1.vkey, w1.url),
    )
    .unwrap();
    ok(afr(&dir).args(["witness", "--policy"]).arg(&policy));

    // Two sealed epochs, both cosigned: only the 5 events of the open epoch are outside the
    // witnesses' root. Its window is their age; the TSA and chain roots are not in use.
    std::thread::sleep(Duration::from_millis(1100));
    let v = status_json(&dir);
    let r = &v["roots"];
    assert_eq!(v["sealed_epochs"], 2, "{v}");
    assert_eq!(r["latest_checkpoint"]["size"], 2, "{r}");
    assert_eq!(
        r["latest_checkpoint"]["signatures"], 2,
        "the log's signature and w1's cosignature: {r}"
    );
    assert_eq!(r["witnesses"]["w1"]["cosigned_size"], 2, "{r}");
    assert_eq!(r["timestamp_tokens"], 0, "{r}");
    assert!(r["timestamped_size"].is_null(), "{r}");
    let window = r["window_s"]["witnesses"].as_f64().unwrap();
    assert!((1.0..120.0).contains(&window), "{r}");
    assert_eq!(r["window_s"]["witnesses_all"], r["window_s"]["witnesses"]);
    assert_eq!(
        r["witnesses"]["w1"]["window_s"].as_f64().unwrap(),
        window,
        "{r}"
    );
    assert!(r["window_s"]["tsa"].is_null(), "{r}");
    assert!(r["window_s"]["chain"].is_null(), "{r}");

    // One more sealed epoch, not yet witnessed: the window now starts at its first event,
    // which is older than the open epoch's.
    record(&dir, 10, "b");
    let v = status_json(&dir);
    let r = &v["roots"];
    assert_eq!(v["sealed_epochs"], 3, "{v}");
    assert_eq!(r["witnesses"]["w1"]["cosigned_size"], 2, "{r}");
    assert!(
        r["window_s"]["witnesses"].as_f64().unwrap() >= window,
        "{r}"
    );

    // The human output says the same.
    let out = ok(afr(&dir).arg("status"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("checkpoint        size 2 signed"), "{text}");
    assert!(
        text.contains("witness           w1 cosigned size 2"),
        "{text}"
    );
    assert!(
        text.contains("window per root   chain not in use, witnesses "),
        "{text}"
    );
    assert!(text.contains("tsa not in use"), "{text}");
}
