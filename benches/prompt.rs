//! Figures, printed, never asserted: `cargo bench --bench prompt`.
//!
//! System-prompt assembly for an agent with 150 skills (a realistic `<available_skills>` list of
//! ≈29,000 chars) and 20 memory files (MEMORY.md + 19 daily logs, today's and yesterday's among
//! them) plus the five workspace files: median and p99 over 200 runs, warm (files cached by stamp,
//! the case before every model call) and cold (a fresh builder, every file read); characters per
//! layer. Also `memory_search` over those 20 files: a cold index build and a warm query.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]
#![allow(clippy::disallowed_methods, reason = "a bench measures real time")]

use bus::ManualClock;
use clawbus::config::PromptDef;
use clawbus::memory::MemoryIndex;
use clawbus::prompt::{PromptBuilder, TurnInfo};
use clawbus::secrets::Secrets;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const RUNS: usize = 200;
const SKILLS: usize = 150;
const MEMORY_FILES: usize = 20;
/// 2026-03-02T13:03:05Z.
const NOW_MS: u64 = 1_772_456_585_000;

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let xml = skills_xml();
    seed(&ws);
    let info = TurnInfo {
        session: "agent:bench:api:direct:main".into(),
        channel: "api".into(),
    };
    let make = || {
        let xml = xml.clone();
        PromptBuilder::new(
            "bench",
            "local/qwen3:8b",
            ws.clone(),
            PromptDef {
                timezone: chrono_tz::Europe::Berlin,
                ..PromptDef::default()
            },
        )
        .with_clock(ManualClock::new(NOW_MS))
        .with_skills(Arc::new(move |_: &str| xml.clone()))
        .with_secrets(
            Secrets::default()
                .with_value("OPENAI_API_KEY", "sk-bench-0123456789abcdef")
                .with_value("BRAVE_API_KEY", "brave-bench-0123456789"),
        )
    };

    let warm = make();
    let out = warm.assemble(&info);
    let mut times = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let started = Instant::now();
        std::hint::black_box(warm.assemble(&info));
        times.push(started.elapsed());
    }
    report("prompt assembly, warm (cached files)", &mut times);

    let mut times = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let started = Instant::now();
        std::hint::black_box(make().assemble(&info));
        times.push(started.elapsed());
    }
    report("prompt assembly, cold (fresh builder)", &mut times);

    let r = &out.report;
    println!(
        "system prompt: {} chars; skills {} listed ({} chars of XML); caps file {} / total {} / memory {}",
        r.system_prompt_chars,
        r.skills.count,
        r.skills.chars,
        r.caps.file_max_chars,
        r.caps.total_max_chars,
        r.caps.memory_max_chars
    );
    for l in &r.layers {
        if l.placement == "system" {
            println!("  layer {:<10} {:>7} chars", l.name, l.chars);
        } else {
            println!("  layer {:<10} {:>7}   (chat messages)", l.name, "-");
        }
    }
    for f in r.files.iter().filter(|f| f.present) {
        println!(
            "  file  {:<24} {:>7} of {:>6} chars{}",
            f.path,
            f.injected_chars,
            f.chars,
            f.cut_by
                .map(|c| format!(" (cut by {c} cap)"))
                .unwrap_or_default()
        );
    }

    let now = chrono::DateTime::from_timestamp_millis(NOW_MS as i64).unwrap();
    let mut times = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let started = Instant::now();
        let mut index = MemoryIndex::new();
        index.refresh(&ws).unwrap();
        std::hint::black_box(index.search("deploy rotation schedule", 5, now));
        times.push(started.elapsed());
    }
    report("memory_search, cold index (20 files chunked)", &mut times);
    let mut index = MemoryIndex::new();
    index.refresh(&ws).unwrap();
    let mut times = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let started = Instant::now();
        index.refresh(&ws).unwrap();
        std::hint::black_box(index.search("deploy rotation schedule", 5, now));
        times.push(started.elapsed());
    }
    report("memory_search, warm index (stat only)", &mut times);
}

fn report(what: &str, times: &mut [Duration]) {
    times.sort();
    let median = times[times.len() / 2];
    let p99 = times[times.len() * 99 / 100];
    println!(
        "{what}: median {median:?}, p99 {p99:?} over {} runs",
        times.len()
    );
}

/// 150 entries shaped like the skills module renders them, ≈195 chars each.
fn skills_xml() -> String {
    let mut out = String::from("<available_skills>\n");
    for i in 0..SKILLS {
        out.push_str(&format!(
            "<skill><name>skill-{i:03}</name><description>Handle task family {i}: gather the inputs, \
             check them, run the steps in order, report</description>\
             <location>.skills/skill-{i:03}/SKILL.md</location></skill>\n"
        ));
    }
    out.push_str("</available_skills>");
    out
}

fn paragraph(seed: usize, chars: usize) -> String {
    let words = [
        "deploy",
        "rotation",
        "schedule",
        "meeting",
        "notes",
        "customer",
        "invoice",
        "review",
        "backup",
        "release",
        "agenda",
        "follow-up",
        "decision",
        "owner",
        "deadline",
        "draft",
    ];
    let mut out = String::new();
    let mut i = seed;
    while out.len() < chars {
        out.push_str(words[i % words.len()]);
        i = i.wrapping_mul(31).wrapping_add(7);
        out.push(if i % 11 == 0 { '\n' } else { ' ' });
        if i % 37 == 0 {
            out.push('\n');
        }
    }
    out
}

fn seed(ws: &Path) {
    let put = |rel: &str, text: String| {
        let p = ws.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    put("SOUL.md", paragraph(1, 1_500));
    put("AGENTS.md", paragraph(2, 8_000));
    put("TOOLS.md", paragraph(3, 3_000));
    put("IDENTITY.md", paragraph(4, 500));
    put("USER.md", paragraph(5, 800));
    put("MEMORY.md", paragraph(6, 3_000));
    let today = chrono::DateTime::from_timestamp_millis(NOW_MS as i64)
        .unwrap()
        .date_naive();
    for ago in 0..(MEMORY_FILES - 1) as i64 {
        let day = today - chrono::Duration::days(ago);
        put(
            &format!("memory/{}.md", day.format("%Y-%m-%d")),
            paragraph(10 + ago as usize, 2_000),
        );
    }
}
