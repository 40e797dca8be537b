//! Rendering a [`Report`]: the Markdown table, the JSON and the SVG bar chart, and writing them.

use super::openclaw;
use super::options::Options;
use super::report::{Report, Stat};
use serde_json::{Value, json};

/// Prints the table (or JSON) and writes `compare.{md,json,svg}` into `opts.out`.
pub(crate) fn emit(report: &Report, opts: &Options) {
    let md = markdown(report);
    let js = serde_json::to_string_pretty(&to_json(report)).unwrap();
    let svg = svg(report);
    std::fs::create_dir_all(&opts.out).unwrap();
    std::fs::write(opts.out.join("compare.md"), &md).unwrap();
    std::fs::write(opts.out.join("compare.json"), &js).unwrap();
    std::fs::write(opts.out.join("compare.svg"), &svg).unwrap();
    println!("{}", if opts.json { &js } else { &md });
    eprintln!(
        "compare: wrote compare.md, compare.json and compare.svg to {}",
        opts.out.display()
    );
}

/// The Markdown table, with the machine and the OpenClaw note.
pub(super) fn markdown(r: &Report) -> String {
    let mut s = format!(
        "Machine: {}; load average {} at the start, {} at the end\n\nOpenClaw: {}\n\n",
        r.machine.line(),
        r.machine.load_before,
        r.load_after,
        r.openclaw
    );
    if let [Some(c), o] = &r.model_request_bytes {
        s.push_str(&format!(
            "Model request body (median, {} requests): clawbus {} B",
            c.n,
            num(c.median)
        ));
        if let Some(o) = o {
            s.push_str(&format!(
                ", OpenClaw {} B ({} requests)",
                num(o.median),
                o.n
            ));
        }
        s.push_str("\n\n");
    }
    s.push_str("| scenario | clawbus (median) | spread | OpenClaw (median) | spread | ratio |\n");
    s.push_str("|---|---|---|---|---|---|\n");
    for row in &r.rows {
        let (oc, oc_spread) = row
            .openclaw
            .as_ref()
            .map_or(("n/a".into(), "".into()), |o| {
                (format!("{} {}", num(o.median), row.unit), o.spread())
            });
        s.push_str(&format!(
            "| {} | {} {} | {} | {oc} | {oc_spread} | {} |\n",
            row.scenario,
            num(row.clawbus.median),
            row.unit,
            row.clawbus.spread(),
            row.ratio().map_or("n/a".into(), |x| format!("{x:.1}×")),
        ));
    }
    s
}

/// The report as JSON.
pub(super) fn to_json(r: &Report) -> Value {
    let stat = |s: &Stat| json!({ "median": s.median, "p99": s.p99, "min": s.min, "max": s.max, "n": s.n });
    json!({
        "machine": {
            "cores": r.machine.cores, "cpu": r.machine.cpu, "memory_gib": r.machine.memory_gib,
            "os": r.machine.os, "kernel": r.machine.kernel,
            "load_before": r.machine.load_before, "load_after": r.load_after,
        },
        "openclaw": r.openclaw,
        "openclaw_run": r.openclaw_run.as_ref().map(openclaw::Outcome::json),
        "model_request_bytes": {
            "clawbus": r.model_request_bytes[0].as_ref().map(stat),
            "openclaw": r.model_request_bytes[1].as_ref().map(stat),
        },
        "sizes": {
            "starts": r.sizes.starts, "turns": r.sizes.turns, "calls": r.sizes.calls,
            "concurrency": r.sizes.concurrency, "repeats": r.sizes.repeats,
            "sessions": r.sizes.sessions, "bus_tasks": r.sizes.bus_tasks,
        },
        "rows": r.rows.iter().map(|row| json!({
            "scenario": row.scenario,
            "unit": row.unit,
            "higher_is_better": row.higher_is_better,
            "clawbus": stat(&row.clawbus),
            "openclaw": row.openclaw.as_ref().map(stat),
            "ratio": row.ratio(),
        })).collect::<Vec<_>>(),
    })
}

/// A horizontal bar chart on a log scale: the ratios when OpenClaw was measured, else clawbus's
/// own medians of the rows in milliseconds.
pub(super) fn svg(r: &Report) -> String {
    let ratios: Vec<(String, f64)> = r
        .rows
        .iter()
        .filter_map(|row| row.ratio().map(|x| (row.scenario.clone(), x)))
        .collect();
    let (title, unit, bars) = if ratios.is_empty() {
        (
            "clawbus, median per scenario (ms, log scale; OpenClaw not measured)",
            "ms",
            r.rows
                .iter()
                .filter(|row| row.unit == "ms")
                .map(|row| (row.scenario.clone(), row.clawbus.median))
                .collect::<Vec<_>>(),
        )
    } else {
        (
            "OpenClaw ÷ clawbus per scenario (log scale; > 1: clawbus faster or smaller)",
            "×",
            ratios,
        )
    };
    let (label_w, plot_w, bar_h, top) = (500.0, 420.0, 22.0, 40.0);
    let h = top + bars.len() as f64 * bar_h + 40.0;
    let positive: Vec<f64> = bars.iter().map(|b| b.1).filter(|v| *v > 0.0).collect();
    let lo = positive.iter().copied().fold(f64::MAX, f64::min).min(1.0);
    let hi = positive.iter().copied().fold(0.0, f64::max).max(lo * 10.0);
    let (lo, hi) = (
        10f64.powf(lo.log10().floor()),
        10f64.powf(hi.log10().ceil()),
    );
    let x =
        |v: f64| label_w + (v.max(lo).log10() - lo.log10()) / (hi.log10() - lo.log10()) * plot_w;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"10\" y=\"20\" font-size=\"14\">{}</text>\n",
        esc(title),
        w = label_w + plot_w + 90.0,
    );
    let mut decade = lo;
    while decade <= hi * 1.0001 {
        let gx = x(decade);
        s.push_str(&format!(
            "<line x1=\"{gx:.1}\" y1=\"{top}\" x2=\"{gx:.1}\" y2=\"{:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{gx:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#555\">{}</text>\n",
            h - 30.0,
            h - 15.0,
            if decade >= 1.0 {
                format!("{decade:.0}")
            } else {
                num(decade)
            }
        ));
        decade *= 10.0;
    }
    for (i, (label, v)) in bars.iter().enumerate() {
        let y = top + i as f64 * bar_h;
        s.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\
             <rect x=\"{label_w}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#3b7dd8\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{} {unit}</text>\n",
            label_w - 8.0,
            y + 15.0,
            esc(label),
            y + 3.0,
            (x(*v) - label_w).max(1.0),
            bar_h - 6.0,
            x(*v) + 4.0,
            y + 15.0,
            num(*v)
        ));
    }
    s.push_str("</svg>\n");
    s
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('`', "")
}

/// A number with about three significant digits.
pub(super) fn num(v: f64) -> String {
    let a = v.abs();
    if a >= 1000.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}
