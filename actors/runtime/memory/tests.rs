use super::*;
use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use std::path::Path;

fn day(s: &str) -> NaiveDate {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
}

/// Noon UTC of a `YYYY-MM-DD` day.
pub(crate) fn noon(s: &str) -> DateTime<Utc> {
    Utc.from_utc_datetime(&day(s).and_hms_opt(12, 0, 0).unwrap())
}

/// A workspace with an empty `memory/` folder.
pub(crate) fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("memory")).unwrap();
    dir
}

/// Writes `text` at `rel` in the workspace, folders included.
pub(crate) fn put(ws: &Path, rel: &str, text: &str) {
    let p = ws.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

#[test]
fn daily_log_paths_round_trip() {
    assert_eq!(daily_log(day("2026-03-01")), "memory/2026-03-01.md");
    assert_eq!(
        daily_log_date("memory/2026-03-01.md"),
        Some(day("2026-03-01"))
    );
    assert_eq!(
        daily_log_date("memory/2026-03-01-standup.md"),
        Some(day("2026-03-01"))
    );
    assert_eq!(daily_log_date("memory/notes.md"), None);
    assert_eq!(daily_log_date("memory/2026-03-01x.md"), None);
    assert_eq!(daily_log_date("MEMORY.md"), None);
}

#[test]
fn chunks_are_paragraphs_with_their_heading_and_at_most_twenty_lines() {
    let long: Vec<String> = (1..=45).map(|i| format!("line {i}")).collect();
    let text = format!(
        "# Title\n\nfirst paragraph\nstill first\n\n## Next\nsecond\n\n{}\n",
        long.join("\n")
    );
    let c = chunks(&text);
    let ranges: Vec<(usize, usize)> = c.iter().map(|c| (c.from_line, c.to_line)).collect();
    assert_eq!(
        ranges,
        [(1, 4), (6, 7), (9, 28), (29, 48), (49, 53)],
        "a heading stays with the paragraph below it; long ones are cut every 20 lines"
    );
    assert!(c[0].text.starts_with("# Title\nfirst paragraph"));
}

#[test]
fn an_exact_keyword_hit_ranks_above_a_near_miss() {
    let ws = workspace();
    put(
        ws.path(),
        "memory/2026-03-01.md",
        "# Infra\nThe postgres backup runs nightly at 02:00 via pgbackrest.\n\n\
         # Lunch\nWe discussed sandwiches and the weather.\n",
    );
    put(
        ws.path(),
        "memory/2026-03-02.md",
        "# Infra\nThe web server backup runs weekly; databases are someone else's job.\n\n\
         # Misc\nPostgresql upgrade planned, backups verified.\n",
    );
    let mut index = MemoryIndex::new();
    index.refresh(ws.path()).unwrap();
    let hits = index.search("postgres backup", 5, noon("2026-03-02"));
    assert_eq!(
        hits.len(),
        2,
        "the exact hit and the one-keyword near miss: {hits:#?}"
    );
    assert_eq!(
        (hits[0].path.as_str(), hits[0].from_line, hits[0].to_line),
        ("memory/2026-03-01.md", 1, 2),
        "both keywords beat one, even from an older day: {hits:#?}"
    );
    assert_eq!(
        (hits[1].path.as_str(), hits[1].from_line),
        ("memory/2026-03-02.md", 1),
        "{hits:#?}"
    );
    assert!(
        hits.iter().all(|h| !h.text.contains("Postgresql")),
        "\"postgresql\"/\"backups\" are other words (no stemming): {hits:#?}"
    );
}

#[test]
fn an_older_note_ranks_below_an_equally_good_newer_one() {
    let ws = workspace();
    let note = "Deploy key rotation happens on the first Monday.\n";
    put(ws.path(), "memory/2026-01-01.md", note);
    put(ws.path(), "memory/2026-03-01.md", note);
    let mut index = MemoryIndex::new();
    index.refresh(ws.path()).unwrap();
    let hits = index.search("deploy key rotation", 5, noon("2026-03-01"));
    assert_eq!(hits.len(), 2, "{hits:#?}");
    assert_eq!(hits[0].path, "memory/2026-03-01.md", "newer first");
    assert_eq!(hits[1].path, "memory/2026-01-01.md");
    assert_eq!(hits[0].relevance, hits[1].relevance, "equally good text");
    assert!(
        (hits[0].decay - 1.0).abs() < 1e-9,
        "today's note is not decayed"
    );
    let expected = 0.5f64.powf(59.0 / HALF_LIFE_DAYS);
    assert!(
        (hits[1].decay - expected).abs() < 1e-9,
        "59 days old: 0.5^(59/30), got {}",
        hits[1].decay
    );
    // Thirty days later, both have aged; the order holds.
    let later = index.search("deploy key rotation", 5, noon("2026-03-31"));
    assert!((later[0].decay - 0.5).abs() < 1e-9, "{later:#?}");
}

#[test]
fn refresh_rechunks_only_files_that_changed() {
    let ws = workspace();
    for i in 1..=5 {
        put(
            ws.path(),
            &format!("memory/2026-02-0{i}.md"),
            &format!("note {i}\n"),
        );
    }
    put(
        ws.path(),
        "MEMORY.md",
        "durable fact: the cat is called Miso\n",
    );
    let mut index = MemoryIndex::new();
    let first = index.refresh(ws.path()).unwrap();
    assert_eq!((first.files, first.rechunked, first.removed), (6, 6, 0));
    let again = index.refresh(ws.path()).unwrap();
    assert_eq!(again.rechunked, 0, "nothing changed, nothing re-read");

    put(
        ws.path(),
        "memory/2026-02-03.md",
        "note 3, now about zebras\n",
    );
    std::fs::remove_file(ws.path().join("memory/2026-02-05.md")).unwrap();
    put(
        ws.path(),
        "memory/topics/pets.md",
        "the dog is called Pilot\n",
    );
    let changed = index.refresh(ws.path()).unwrap();
    assert_eq!(
        (changed.files, changed.rechunked, changed.removed),
        (6, 2, 1),
        "one changed, one new (in a subfolder), one gone"
    );
    let now = noon("2026-02-10");
    assert_eq!(
        index.search("zebras", 3, now)[0].path,
        "memory/2026-02-03.md"
    );
    assert_eq!(
        index.search("pilot", 3, now)[0].path,
        "memory/topics/pets.md"
    );
    assert!(
        index
            .search("note 5", 3, now)
            .iter()
            .all(|h| h.path != "memory/2026-02-05.md")
    );
    assert_eq!(index.search("miso", 3, now)[0].path, "MEMORY.md");
}

struct Constant;

impl Retriever for Constant {
    fn relevance(&self, index: &MemoryIndex, _: &str) -> Vec<f64> {
        index.chunks().map(|c| c.chunk.from_line as f64).collect()
    }
}

#[test]
fn another_retriever_plugs_into_the_same_ranking() {
    let ws = workspace();
    put(ws.path(), "memory/2026-03-01.md", "a\n\nb\n\nc\n");
    let mut index = MemoryIndex::new();
    index.refresh(ws.path()).unwrap();
    let hits = index.search_with(&Constant, "anything", 2, noon("2026-03-01"));
    let lines: Vec<usize> = hits.iter().map(|h| h.from_line).collect();
    assert_eq!(lines, [5, 3]);
}
