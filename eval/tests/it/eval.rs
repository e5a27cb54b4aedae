//! `afr-eval eval --quick`: every research question runs end to end (a real anvil for RQ2 and the
//! anchoring comparison, the real trajectories for RQ1) and lands in the report and its plots.

use std::path::Path;

use super::{afr_eval, ok};

#[test]
fn eval_quick_writes_every_section_and_both_plots() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("evaluation.md");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    ok(afr_eval()
        .current_dir(&root)
        .args(["eval", "--quick", "--out"])
        .arg(&out));
    let md = std::fs::read_to_string(&out).unwrap();
    for heading in [
        "## RQ1",
        "### The same on real SWE-agent trajectories",
        "### The full recorder with anchoring in flight",
        "## RQ2",
        "## RQ3",
        "## RQ4",
    ] {
        assert!(md.contains(heading), "missing {heading} in\n{md}");
    }
    // Every configuration appears at every quick size, with numbers in it.
    for size in ["| 100 |", "| 1000 |"] {
        assert!(md.matches(size).count() >= 5, "{size}\n{md}");
    }
    assert!(md.contains("(38 steps)"), "{md}");
    assert!(
        md.contains("0 false positives") || md.contains("honest"),
        "{md}"
    );
    for plot in ["latency-cdf.svg", "cost-window.svg"] {
        let svg = std::fs::read_to_string(tmp.path().join("eval").join(plot)).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("<polyline"),
            "{plot}"
        );
    }
}
