#!/usr/bin/env bash
# Regenerates verifier/testdata/: the catalogue of named negative vectors (one evidence file per
# attack, its case file with the expected report, and the anchors files they are checked
# against). Deterministic; review any diff as a change of the format or of the verifier.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
AFR_REGEN_TESTDATA=1 cargo test -p afr-verify --test it testdata -- --exact testdata::testdata
ls verifier/testdata | wc -l
