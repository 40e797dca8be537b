//! The comparison bench's harness (`benches/compare/`) run at tiny sizes, so it cannot rot:
//! every scenario runs against a real `clawbus up` and the table, JSON and SVG are written.
//! No figure is asserted, only that every scenario produced one.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(
    clippy::disallowed_methods,
    reason = "the bench harness measures real time"
)]

#[path = "../benches/compare/harness.rs"]
mod harness;

#[test]
fn every_compare_scenario_runs_at_tiny_sizes() {
    let out = tempfile::tempdir().unwrap();
    let args = ["--tiny", "--json", "--out"].map(String::from);
    let args = args.into_iter().chain([out.path().display().to_string()]);
    let opts = harness::Options::parse(args).unwrap();
    assert!(harness::Options::parse(["--nope".to_string()]).is_err());
    let report = harness::run(&opts);
    assert_eq!(report.rows.len(), 18, "{:#?}", report.rows);
    for row in &report.rows {
        assert!(row.clawbus.median.is_finite(), "{row:?}");
        assert!(row.ratio().is_none(), "{row:?}");
    }
    harness::emit(&report, &opts);
    for file in ["compare.md", "compare.json", "compare.svg"] {
        let text = std::fs::read_to_string(out.path().join(file)).unwrap();
        assert!(!text.is_empty(), "{file}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("compare.json")).unwrap())
            .unwrap();
    assert_eq!(json["rows"].as_array().unwrap().len(), report.rows.len());
    assert!(json["machine"]["cores"].as_u64().unwrap() >= 1);
}

/// The list build.rs hands the linker (`benches/callgrind.py --symbol-order`): the file it names,
/// one linker-level name a line, each once, the allocator's hot path near the top. A list that
/// no longer parses or lost its hottest entries would silently leave the default layout.
#[test]
fn the_symbol_order_lists_each_function_once_by_its_linker_name() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let build = std::fs::read_to_string(root.join("build.rs")).unwrap();
    let path = "actors/main/symbol-order.txt";
    assert!(
        build.contains(&format!("\"{path}\"")),
        "build.rs reads {path}"
    );
    let text = std::fs::read_to_string(root.join(path)).unwrap();
    let names: Vec<&str> = text.lines().collect();
    assert!(names.len() > 1000, "{} names", names.len());
    let mut seen = std::collections::HashSet::new();
    for (i, name) in names.iter().enumerate() {
        assert!(
            !name.is_empty() && !name.contains(char::is_whitespace),
            "line {}: {name:?} is not a linker-level name",
            i + 1
        );
        assert!(seen.insert(*name), "line {}: {name} twice", i + 1);
    }
    assert!(
        names[..50].contains(&"mi_free"),
        "the allocator's free is among the hottest functions a turn runs"
    );
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("_ZN") || n.starts_with("_R")),
        "Rust functions by their mangled names"
    );
}
