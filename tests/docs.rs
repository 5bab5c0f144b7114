#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The documentation keeps up with the code: every reason code is documented.

use fleetscaler::engine::reason::ReasonCode;

#[test]
fn plan_format_documents_every_reason_code() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/plan-format.md"))
        .unwrap();
    let missing: Vec<&str> = ReasonCode::ALL
        .iter()
        .map(|c| c.as_str())
        .filter(|c| !doc.contains(&format!("| `{c}` |")))
        .collect();
    assert!(missing.is_empty(), "undocumented reason codes: {missing:?}");
}
