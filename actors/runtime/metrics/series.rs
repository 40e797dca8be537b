//! The series handles callers hold: thin wrappers over `prometheus-client`'s metrics that keep
//! this crate's small API (`Gauge::add`, setters that return nothing, NaN-proof histograms).

use prometheus_client::metrics::counter::Counter as PCounter;
use prometheus_client::metrics::family::MetricConstructor;
use prometheus_client::metrics::gauge::Gauge as PGauge;
use prometheus_client::metrics::histogram::Histogram as PHistogram;
use std::sync::Arc;

/// A monotonically increasing count.
#[derive(Clone, Debug, Default)]
pub struct Counter(pub(super) PCounter<u64>);

impl Counter {
    /// Adds one.
    pub fn inc(&self) {
        self.0.inc();
    }

    /// Adds `n`.
    pub(crate) fn inc_by(&self, n: u64) {
        self.0.inc_by(n);
    }

    /// The current count.
    pub fn get(&self) -> u64 {
        self.0.get()
    }
}

/// A value that goes up and down (an integer: sizes and counts of live things).
#[derive(Clone, Debug, Default)]
pub struct Gauge(pub(super) PGauge<i64>);

impl Gauge {
    /// Sets the value.
    pub fn set(&self, v: i64) {
        self.0.set(v);
    }

    /// Adds `d` (may be negative).
    pub fn add(&self, d: i64) {
        self.0.inc_by(d);
    }

    /// Adds one.
    pub fn inc(&self) {
        self.0.inc();
    }

    /// Subtracts one.
    pub(crate) fn dec(&self) {
        self.0.dec();
    }

    /// The current value.
    pub fn get(&self) -> i64 {
        self.0.get()
    }
}

/// Observations counted into cumulative buckets, with their sum and count.
#[derive(Clone, Debug)]
pub struct Histogram(pub(super) PHistogram);

impl Histogram {
    /// Records one observation (NaN is ignored: it would poison the sum).
    pub(crate) fn observe(&self, v: f64) {
        if !v.is_nan() {
            self.0.observe(v);
        }
    }
}

/// The bucket upper bounds of one histogram family: finite, ascending, no duplicates. Builds each
/// new series of the family (the implicit `+Inf` bucket is added by `prometheus-client`).
#[derive(Clone, Debug)]
pub(super) struct Buckets(Arc<[f64]>);

impl Buckets {
    /// Sorts `bounds` and drops non-finite and repeated ones.
    pub(super) fn new(bounds: &[f64]) -> Self {
        let mut kept: Vec<f64> = bounds.iter().copied().filter(|b| b.is_finite()).collect();
        kept.sort_by(f64::total_cmp);
        kept.dedup();
        Self(kept.into())
    }

    /// A series with these buckets that belongs to no family.
    pub(super) fn histogram(&self) -> Histogram {
        Histogram(self.new_metric())
    }
}

impl MetricConstructor<PHistogram> for Buckets {
    fn new_metric(&self) -> PHistogram {
        PHistogram::new(self.0.iter().copied())
    }
}
