//! `afr` anchoring commands: fork alarm, keystore, and killing `afr anchor` mid-flight.

use std::path::Path;

use afr_recorder::{Config, ForkAlarm, Recorder};

use super::afr;

fn status(dir: &Path) -> (Option<i32>, serde_json::Value, String) {
    let json = afr(dir).args(["status", "--json"]).output().unwrap();
    let text = afr(dir).arg("status").output().unwrap();
    assert_eq!(json.status.code(), text.status.code());
    (
        json.status.code(),
        serde_json::from_slice(&json.stdout).unwrap(),
        String::from_utf8_lossy(&text.stdout).into_owned(),
    )
}

#[test]
fn a_fork_alarm_in_the_store_makes_status_loud_and_anchor_refuse() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("afr");
    assert!(afr(&dir).arg("init").status().unwrap().success());
    let (code, v, text) = status(&dir);
    assert_eq!(code, Some(0), "{text}");
    assert!(v["fork_alarm"].is_null());
    assert!(!text.contains("FORK ALARM"), "{text}");

    let alarm = ForkAlarm {
        epoch: 4,
        local: [1; 32],
        onchain: [2; 32],
        chain_id: 31337,
        contract: [3; 20],
        tx: Some([4; 32]),
        block: Some(17),
        seen_at_us: 1_700_000_000_000_000,
    };
    {
        let r = Recorder::open(&dir, Config::default()).unwrap();
        r.store().put_fork_alarm(&alarm).unwrap();
        // A second fork does not overwrite the first.
        r.store()
            .put_fork_alarm(&ForkAlarm {
                epoch: 9,
                ..alarm.clone()
            })
            .unwrap();
        assert_eq!(r.store().fork_alarm().unwrap(), Some(alarm.clone()));
    }
    let (code, v, text) = status(&dir);
    assert_eq!(code, Some(3), "{text}");
    assert_eq!(v["fork_alarm"]["epoch"], 4);
    assert_eq!(
        v["fork_alarm"]["local_root"],
        format!("0x{}", "01".repeat(32))
    );
    assert_eq!(
        v["fork_alarm"]["onchain_root"],
        format!("0x{}", "02".repeat(32))
    );
    assert_eq!(v["fork_alarm"]["tx"], format!("0x{}", "04".repeat(32)));
    assert_eq!(v["fork_alarm"]["block"], 17);
    assert!(
        text.lines()
            .next()
            .unwrap()
            .starts_with("FORK ALARM: epoch 4"),
        "{text}"
    );

    // `afr anchor` refuses before it talks to any chain (nothing listens on port 9).
    let contract = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
    let out = afr(&dir)
        .args([
            "anchor",
            "--rpc",
            "http://127.0.0.1:9",
            "--contract",
            contract,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("FORK ALARM: epoch 4"));
    // Clearing names the epoch; a wrong one is refused and the alarm stays.
    let out = afr(&dir)
        .args([
            "anchor",
            "--rpc",
            "http://127.0.0.1:9",
            "--contract",
            contract,
        ])
        .args(["--clear-fork-alarm", "5"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("about epoch 4, not 5"));
    assert_eq!(status(&dir).0, Some(3));

    Recorder::open(&dir, Config::default())
        .unwrap()
        .store()
        .clear_fork_alarm()
        .unwrap();
    assert_eq!(status(&dir).0, Some(0));
}
