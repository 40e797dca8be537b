use super::*;

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
wait_seconds_bucket{lane=\"main\",le=\"0.1\"} 1
wait_seconds_bucket{lane=\"main\",le=\"1\"} 2
wait_seconds_bucket{lane=\"main\",le=\"+Inf\"} 3
wait_seconds_sum{lane=\"main\"} 5.5625
wait_seconds_count{lane=\"main\"} 3
";
    assert_eq!(m.render_prometheus(), expected);
}

#[test]
fn registering_the_same_series_twice_shares_it() {
    let m = Metrics::new();
    let a = m.gauge("g", "A gauge.", &[("x", "1"), ("y", "2")]);
    let b = m.gauge("g", "A gauge.", &[("y", "2"), ("x", "1")]);
    a.inc();
    b.inc();
    assert_eq!(a.get(), 2, "label order does not make another series");
    assert_eq!(m.render_prometheus().matches("\ng{").count(), 1);
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
    m.counter("dup", "A counter.", &[]).inc();
    let clash = m.gauge("dup", "Now a gauge.", &[]);
    clash.set(7);
    let bad = m.counter("1bad name", "Bad.", &[]);
    bad.inc();
    let bad_label = m.histogram("h", "Bad label.", &[1.0], &[("le", "x")]);
    bad_label.observe(0.5);
    assert_eq!(clash.get(), 7, "a detached series still counts");
    let text = m.render_prometheus();
    assert_eq!(text, "# HELP dup A counter.\n# TYPE dup counter\ndup 1\n");
}

#[test]
fn histogram_buckets_are_inclusive_upper_bounds() {
    let m = Metrics::new();
    let h = m.histogram("h", "H.", &[0.5, f64::INFINITY, 1.0, 0.5], &[]);
    h.observe(0.5);
    h.observe(1.0);
    h.observe(f64::NAN);
    h.observe(2.0);
    let data = h.snapshot();
    assert_eq!(data.bounds, vec![0.5, 1.0], "sorted, deduplicated, finite");
    assert_eq!(data.counts, vec![1, 1, 1]);
    assert_eq!(data.count, 3, "NaN is not an observation");
    assert_eq!(render::number(f64::INFINITY), "+Inf");
    assert_eq!(render::number(0.001), "0.001");
    assert_eq!(render::number(30.0), "30");
}
