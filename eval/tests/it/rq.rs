//! RQ2 and RQ4 end to end through `afr-eval`: gas measured on a real anvil and priced; the
//! incidents' structured queries exact, grep's not, the bundle verified.

use super::{afr_eval, ok};

#[test]
fn cost_measures_gas_on_a_real_chain_and_prices_the_rq2_table() {
    let out = ok(afr_eval()
        .env_remove("AFR_ANCHOR_KEY")
        .args(["cost", "--json", "--batch", "8", "--rate", "50"])
        .arg("--anvil")
        .arg(afr_testkit::tool("anvil")));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["chain_id"], 31337);
    let single = v["single"]["gas_per_epoch"].as_f64().unwrap();
    let batched = v["batched"]["gas_per_epoch"].as_f64().unwrap();
    // docs/gas.md: a steady-state anchor is just under 50,000 gas, a batched epoch far less.
    assert!((45_000.0..50_000.0).contains(&single), "{single}");
    assert!(batched < 0.7 * single, "{batched} vs {single}");
    assert_eq!(v["single"]["transactions"], 5);
    // What the receipts say was charged: gas × effective price (anvil has no L1 data fee).
    assert!(
        v["single"]["charged_wei_per_epoch"].as_f64().unwrap() > 0.0,
        "{v}"
    );
    assert_eq!(v["batched"]["epochs_per_tx"], 8);
    // A signed anchor: 100 calldata bytes plus the envelope.
    let bytes = v["single"]["tx_bytes_per_epoch"].as_f64().unwrap();
    assert!((150.0..260.0).contains(&bytes), "{bytes}");
    let rows = v["rows"].as_array().unwrap();
    let sizes: Vec<u64> = rows
        .iter()
        .map(|r| r["epoch_size"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes, [10, 50, 100, 500, 1000]);
    let r100 = &rows[2];
    assert_eq!(r100["anchors_per_100k_events"], 1000.0);
    assert_eq!(r100["window_s"], 2.0);
    assert_eq!(r100["window_batched_s"], 16.0);
    // 1,000 anchors × gas × 20 gwei × $3,000.
    let l1 = r100["l1_usd_per_100k"].as_f64().unwrap();
    assert!((l1 - 1000.0 * single * 20e-9 * 3000.0).abs() < 1e-6, "{l1}");
    let l2 = r100["l2_usd_per_100k"].as_f64().unwrap();
    assert!(l2 > 0.0 && l2 < l1 / 100.0, "{l2}");
    assert_eq!(r100["paper"]["usd_per_100k"], 2.30);
    assert_eq!(rows[4]["paper"]["chain"], "L1");
    // Cost scales inversely with the epoch size.
    let l2_10 = rows[0]["l2_usd_per_100k"].as_f64().unwrap();
    assert!((l2_10 / l2 - 10.0).abs() < 1e-9);
}

#[test]
fn rq4_structured_queries_are_exact_and_the_chain_verifies() {
    let out = ok(afr_eval().args(["rq4", "--background", "3000", "--json"]));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 10);
    assert_eq!(
        rows.iter()
            .filter(|r| r["scenario"].as_str().unwrap().starts_with("A:"))
            .count(),
        5
    );
    for r in rows {
        assert_eq!(r["structured_precision"], 1.0, "{r}");
        assert_eq!(r["structured_recall"], 1.0, "{r}");
        assert!(r["truth"].as_u64().unwrap() >= 1, "{r}");
    }
    // The configuration read is found exactly, and grep cannot do it.
    let cfg = rows
        .iter()
        .find(|r| r["lookup"] == "configuration")
        .unwrap();
    assert_eq!(cfg["structured_hits"], 1);
    assert!(cfg["grep_precision"].as_f64().unwrap() < 0.1, "{cfg}");
    for kind in ["guardrail", "delegation"] {
        assert!(
            rows.iter()
                .filter(|r| r["lookup"] == kind)
                .any(|r| r["grep_precision"].as_f64().unwrap() < 0.1),
            "{kind}"
        );
    }
    assert_eq!(v["bundle"]["outcome"], "verified");
    assert_eq!(v["bundle"]["chain_reconstructed"], true);
    assert_eq!(v["bundle"]["opened_matching"], 4);
}

/// `afr cost --rpc` anchors synthetic epochs: with the production key in the environment it
/// refuses (nothing sent) unless told to sign with it on purpose.
#[test]
fn cost_on_an_endpoint_refuses_the_production_key_unless_told() {
    let chain = afr_testkit::anvil();
    let out = afr_eval()
        .env("AFR_ANCHOR_KEY", afr_testkit::DEV_KEY)
        .args(["cost", "--json", "--rpc", &chain.url])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--with-anchor-key"), "{err}");
    let nonce = afr_testkit::cast_at(&chain.url, &["nonce", afr_testkit::DEV_ADDR]);
    assert_eq!(nonce, "0", "nothing was sent");
    let out = ok(afr_eval()
        .env("AFR_ANCHOR_KEY", afr_testkit::DEV_KEY)
        .args([
            "cost",
            "--json",
            "--batch",
            "2",
            "--with-anchor-key",
            "--rpc",
            &chain.url,
        ]));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["chain_id"], 31337);
}
