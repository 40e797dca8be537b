//! A small metrics registry: counters, gauges and histograms with labels, rendered in the
//! Prometheus text exposition format 0.0.4 (served by the gateway at `GET /metrics`).
//!
//! [`Metrics`] is a cheap clonable handle on one registry. Registering returns a handle to one
//! series (one label set of a family); registering the same name and labels again returns the same
//! series, so any actor can ask for its series at start without coordinating with others:
//!
//! ```
//! # use clawbus::metrics::Metrics;
//! let metrics = Metrics::new();
//! let ok = metrics.counter("clawbus_turns_total", "Turns by outcome.", &[("outcome", "succeeded")]);
//! ok.inc();
//! let live = metrics.gauge("clawbus_sessions_live", "Live session actors.", &[]);
//! live.set(3);
//! assert!(metrics.render_prometheus().contains("clawbus_turns_total{outcome=\"succeeded\"} 1\n"));
//! ```
//!
//! Registration never fails: a name that is not a valid Prometheus name, or a name already
//! registered as another kind, is logged as an error and the caller gets a detached series that
//! counts but is never rendered. A metrics mistake must not stop a daemon.

mod render;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Buckets, in seconds, for wait and latency histograms: 1 ms to 30 s.
pub const SECONDS_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0,
];

/// The registry handle; clones share the same registry.
#[derive(Clone, Default)]
pub struct Metrics {
    families: Arc<Mutex<BTreeMap<String, Family>>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("families", &self.lock().len())
            .finish()
    }
}

/// What a family measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Counter => "counter",
            Self::Gauge => "gauge",
            Self::Histogram => "histogram",
        }
    }
}

/// Label pairs sorted by name: the identity of a series within its family.
type Labels = Vec<(String, String)>;

/// All series of one metric name.
struct Family {
    help: String,
    kind: Kind,
    /// Upper bounds of a histogram family (finite, ascending); empty for other kinds.
    buckets: Vec<f64>,
    series: BTreeMap<Labels, Series>,
}

#[derive(Clone)]
enum Series {
    Counter(Counter),
    Gauge(Gauge),
    Histogram(Histogram),
}

/// A monotonically increasing count.
#[derive(Clone, Debug, Default)]
pub struct Counter(Arc<AtomicU64>);

impl Counter {
    /// Adds one.
    pub fn inc(&self) {
        self.inc_by(1);
    }

    /// Adds `n`.
    pub fn inc_by(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// The current count.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A value that goes up and down (an integer: sizes and counts of live things).
#[derive(Clone, Debug, Default)]
pub struct Gauge(Arc<AtomicI64>);

impl Gauge {
    /// Sets the value.
    pub fn set(&self, v: i64) {
        self.0.store(v, Ordering::Relaxed);
    }

    /// Adds `d` (may be negative).
    pub fn add(&self, d: i64) {
        self.0.fetch_add(d, Ordering::Relaxed);
    }

    /// Adds one.
    pub fn inc(&self) {
        self.add(1);
    }

    /// Subtracts one.
    pub fn dec(&self) {
        self.add(-1);
    }

    /// The current value.
    pub fn get(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Observations counted into cumulative buckets, with their sum and count.
#[derive(Clone, Debug)]
pub struct Histogram(Arc<Mutex<HistogramData>>);

/// A snapshot of a histogram.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HistogramData {
    /// Upper bounds, ascending (the implicit `+Inf` bucket is not listed).
    pub bounds: Vec<f64>,
    /// Observations per bucket, NOT cumulative; one more entry than `bounds` (the `+Inf` one).
    pub counts: Vec<u64>,
    /// Sum of all observations.
    pub sum: f64,
    /// Number of observations.
    pub count: u64,
}

impl Histogram {
    fn with_bounds(bounds: Vec<f64>) -> Self {
        let counts = vec![0; bounds.len() + 1];
        Self(Arc::new(Mutex::new(HistogramData {
            bounds,
            counts,
            sum: 0.0,
            count: 0,
        })))
    }

    fn lock(&self) -> MutexGuard<'_, HistogramData> {
        // Poisoning only means a panic elsewhere while holding it; the numbers are still sound.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records one observation (NaN is ignored).
    pub fn observe(&self, v: f64) {
        if v.is_nan() {
            return;
        }
        let mut data = self.lock();
        let i = data.bounds.partition_point(|&b| b < v);
        if let Some(c) = data.counts.get_mut(i) {
            *c += 1;
        }
        data.sum += v;
        data.count += 1;
    }

    /// A copy of the current state.
    pub fn snapshot(&self) -> HistogramData {
        self.lock().clone()
    }
}

impl Metrics {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Family>> {
        self.families.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The counter `name{labels}`, registered on first use.
    pub fn counter(&self, name: &str, help: &str, labels: &[(&str, &str)]) -> Counter {
        match self.series(name, help, Kind::Counter, &[], labels, |_| {
            Series::Counter(Counter::default())
        }) {
            Some(Series::Counter(c)) => c,
            _ => Counter::default(),
        }
    }

    /// The gauge `name{labels}`, registered on first use.
    pub fn gauge(&self, name: &str, help: &str, labels: &[(&str, &str)]) -> Gauge {
        match self.series(name, help, Kind::Gauge, &[], labels, |_| {
            Series::Gauge(Gauge::default())
        }) {
            Some(Series::Gauge(g)) => g,
            _ => Gauge::default(),
        }
    }

    /// The histogram `name{labels}` with these bucket upper bounds, registered on first use.
    ///
    /// Bounds are sorted and non-finite ones dropped; the first registration of a name fixes its
    /// buckets for every label set (later `buckets` arguments are ignored).
    pub fn histogram(
        &self,
        name: &str,
        help: &str,
        buckets: &[f64],
        labels: &[(&str, &str)],
    ) -> Histogram {
        let mut bounds: Vec<f64> = buckets.iter().copied().filter(|b| b.is_finite()).collect();
        bounds.sort_by(f64::total_cmp);
        bounds.dedup();
        match self.series(name, help, Kind::Histogram, &bounds, labels, |fixed| {
            Series::Histogram(Histogram::with_bounds(fixed.to_vec()))
        }) {
            Some(Series::Histogram(h)) => h,
            _ => Histogram::with_bounds(bounds),
        }
    }

    /// Finds or creates a series; `None` (logged) when the name, labels or kind are wrong.
    fn series(
        &self,
        name: &str,
        help: &str,
        kind: Kind,
        buckets: &[f64],
        labels: &[(&str, &str)],
        new: impl FnOnce(&[f64]) -> Series,
    ) -> Option<Series> {
        if !render::is_metric_name(name) {
            tracing::error!(
                metric = name,
                "Invalid metric name; the series is not exported."
            );
            return None;
        }
        let reserved = |l: &str| kind == Kind::Histogram && l == "le";
        if let Some((bad, _)) = labels
            .iter()
            .find(|(l, _)| !render::is_label_name(l) || reserved(l))
        {
            tracing::error!(
                metric = name,
                label = bad,
                "Invalid label name; the series is not exported."
            );
            return None;
        }
        let mut key: Labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        key.sort();
        let mut families = self.lock();
        let family = families.entry(name.to_string()).or_insert_with(|| Family {
            help: help.to_string(),
            kind,
            buckets: buckets.to_vec(),
            series: BTreeMap::new(),
        });
        if family.kind != kind {
            tracing::error!(
                metric = name,
                registered = family.kind.as_str(),
                requested = kind.as_str(),
                "Metric already registered as another kind; the series is not exported."
            );
            return None;
        }
        let buckets = family.buckets.clone();
        Some(
            family
                .series
                .entry(key)
                .or_insert_with(|| new(&buckets))
                .clone(),
        )
    }

    /// The whole registry in the Prometheus text exposition format, version 0.0.4.
    pub fn render_prometheus(&self) -> String {
        let families = self.lock();
        let mut out = String::new();
        for (name, family) in families.iter() {
            render::family(&mut out, name, family);
        }
        out
    }
}

/// The `Content-Type` of [`Metrics::render_prometheus`]'s output.
pub const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
