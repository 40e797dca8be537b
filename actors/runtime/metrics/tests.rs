use super::*;

/// The rendered lines, sorted: `prometheus-client` keeps a family's series in a hash map, so their
/// order is not fixed.
fn sorted_lines(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    lines
}

#[test]
fn counter_gauge_and_histogram_render_in_prometheus_text_format() {
    let m = Metrics::new();
    m.counter("jobs_total", "Jobs done, by outcome.", &[("outcome", "ok")])
        .inc_by(2);
    m.counter(
        "jobs_total",
        "Jobs done, by outcome.",
        &[("outcome", "failed")],
    )
    .inc();
    m.gauge("live", "Live things.", &[]).set(3);
    let h = m.histogram(
        "wait_seconds",
        "Time spent waiting.",
        &[1.0, 0.1],
        &[("lane", "main")],
    );
    h.observe(0.0625);
    h.observe(0.5);
    h.observe(5.0);
    let text = m.render_prometheus();
    let expected = "\
# HELP jobs_total Jobs done, by outcome.
# TYPE jobs_total counter
jobs_total{outcome=\"failed\"} 1
jobs_total{outcome=\"ok\"} 2
# HELP live Live things.
# TYPE live gauge
live 3
# HELP wait_seconds Time spent waiting.
# TYPE wait_seconds histogram
wait_seconds_sum{lane=\"main\"} 5.5625
wait_seconds_count{lane=\"main\"} 3
wait_seconds_bucket{lane=\"main\",le=\"0.1\"} 1
wait_seconds_bucket{lane=\"main\",le=\"1\"} 2
wait_seconds_bucket{lane=\"main\",le=\"+Inf\"} 3
";
    assert_eq!(sorted_lines(&text), sorted_lines(expected), "{text}");
    assert!(
        text.starts_with("# HELP jobs_total Jobs done, by outcome.\n# TYPE jobs_total counter\n"),
        "families come in registration order, HELP then TYPE:\n{text}"
    );
}

#[test]
fn a_counter_without_total_is_exported_with_it_and_help_gets_one_period() {
    let m = Metrics::new();
    m.counter("restarts", "Restarts", &[]).inc();
    assert_eq!(
        m.render_prometheus(),
        "# HELP restarts_total Restarts.\n# TYPE restarts_total counter\nrestarts_total 1\n"
    );
}

#[test]
fn registering_the_same_series_twice_shares_it() {
    let m = Metrics::new();
    let a = m.gauge("g", "A gauge.", &[("x", "1"), ("y", "2")]);
    let b = m.gauge("g", "A gauge.", &[("y", "2"), ("x", "1")]);
    a.inc();
    b.inc();
    assert_eq!(a.get(), 2, "label order does not make another series");
    let text = m.render_prometheus();
    assert_eq!(text.matches("\ng{").count(), 1, "{text}");
    assert_eq!(text.matches("# TYPE g gauge").count(), 1, "{text}");
}

#[test]
fn label_values_and_help_are_escaped() {
    let m = Metrics::new();
    m.counter("c_total", "Line one\nback\\slash.", &[("v", "a\"b\\c\nd")])
        .inc();
    let text = m.render_prometheus();
    assert!(
        text.contains("# HELP c_total Line one\\nback\\\\slash.\n"),
        "{text}"
    );
    assert!(
        text.contains("c_total{v=\"a\\\"b\\\\c\\nd\"} 1\n"),
        "{text}"
    );
}

#[test]
fn wrong_names_and_kind_clashes_give_detached_series() {
    let m = Metrics::new();
    m.counter("dup_total", "A counter.", &[]).inc();
    let clash = m.gauge("dup_total", "Now a gauge.", &[]);
    clash.set(7);
    let bad = m.counter("1bad name", "Bad.", &[]);
    bad.inc();
    let bad_label = m.histogram("h", "Bad label.", &[1.0], &[("le", "x")]);
    bad_label.observe(0.5);
    let reserved = m.gauge("r", "Reserved label.", &[("__x", "1")]);
    reserved.set(1);
    assert_eq!(clash.get(), 7, "a detached series still counts");
    assert_eq!(bad.get(), 1);
    let text = m.render_prometheus();
    assert_eq!(
        text,
        "# HELP dup_total A counter.\n# TYPE dup_total counter\ndup_total 1\n"
    );
}

#[test]
fn histogram_buckets_are_inclusive_sorted_finite_upper_bounds() {
    let m = Metrics::new();
    let h = m.histogram("h", "H.", &[0.5, f64::INFINITY, 1.0, 0.5], &[]);
    h.observe(0.5);
    h.observe(1.0);
    h.observe(f64::NAN);
    h.observe(2.0);
    let later = m.histogram("h", "H.", &[100.0], &[("x", "1")]);
    later.observe(50.0);
    let text = m.render_prometheus();
    for line in [
        "h_bucket{le=\"0.5\"} 1",
        "h_bucket{le=\"1\"} 2",
        "h_bucket{le=\"+Inf\"} 3",
        "h_sum 3.5",
        "h_count 3",
        "h_bucket{x=\"1\",le=\"1\"} 0",
        "h_bucket{x=\"1\",le=\"+Inf\"} 1",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "{line:?} (NaN ignored, buckets fixed by the first registration):\n{text}"
        );
    }
    assert_eq!(text.matches("le=\"+Inf\"").count(), 2, "{text}");
    assert_eq!(text.matches("le=\"0.5\"").count(), 2, "{text}");
}

#[test]
fn seconds_buckets_render_like_go_clients() {
    let m = Metrics::new();
    m.histogram("w", "W.", SECONDS_BUCKETS, &[]).observe(0.001);
    let text = m.render_prometheus();
    for le in ["0.001", "0.025", "2", "30"] {
        assert!(
            text.contains(&format!("w_bucket{{le=\"{le}\"}} 1\n")),
            "{le}: {text}"
        );
    }
}

#[test]
fn a_counter_asked_for_again_is_the_same_series_whatever_the_spelling() {
    let m = Metrics::new();
    let first = m.counter(
        "turns_total",
        "Turns.",
        &[("agent", "a"), ("outcome", "ok")],
    );
    // Asked again the same way (answered from the resolved counters), with the labels in
    // another order, and without `_total`: one series.
    let again = m.counter(
        "turns_total",
        "Turns.",
        &[("agent", "a"), ("outcome", "ok")],
    );
    let reordered = m.counter(
        "turns_total",
        "Turns.",
        &[("outcome", "ok"), ("agent", "a")],
    );
    let bare = m.counter("turns", "Turns.", &[("agent", "a"), ("outcome", "ok")]);
    let other = m.counter(
        "turns_total",
        "Turns.",
        &[("agent", "a"), ("outcome", "failed")],
    );
    for c in [&first, &again, &reordered, &bare] {
        c.inc();
    }
    other.inc();
    assert_eq!(first.get(), 4);
    assert_eq!(other.get(), 1);
    let text = m.render_prometheus();
    assert!(
        text.contains("turns_total{agent=\"a\",outcome=\"ok\"} 4\n"),
        "{text}"
    );
    assert!(
        text.contains("turns_total{agent=\"a\",outcome=\"failed\"} 1\n"),
        "{text}"
    );
}
