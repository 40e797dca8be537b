//! Metrics: counters, gauges and histograms with labels, kept in a `prometheus-client` registry
//! and rendered in the Prometheus text exposition format 0.0.4 (served by the gateway at
//! `GET /metrics`).
//!
//! [`Metrics`] is a cheap clonable handle on one registry. Registering returns a handle to one
//! series (one label set of a family); registering the same name and labels again returns the same
//! series, so any actor can ask for its series at start without coordinating with others:
//!
//! ```
//! # use clawbus_runtime::metrics::Metrics;
//! let metrics = Metrics::new();
//! let ok = metrics.counter("clawbus_turns_total", "Turns by outcome.", &[("outcome", "succeeded")]);
//! ok.inc();
//! let live = metrics.gauge("clawbus_sessions_live", "Live session actors.", &[]);
//! live.set(3);
//! assert!(metrics.render_prometheus().contains("clawbus_turns_total{outcome=\"succeeded\"} 1\n"));
//! ```
//!
//! This module is a thin adapter over `prometheus-client`, for three reasons: that crate wants
//! every family registered once, up front, with `&mut Registry`, while here any actor registers
//! its own series lazily through a shared handle (so the adapter keeps name → family and hands
//! out the one family's series); it renders any name it is given, so names are checked here; and
//! it names counters `<name>_total` and ends help with a period itself, so a counter's `_total`
//! and the help's final period are taken off before it sees them.
//!
//! Registration never fails: a name that is not a valid Prometheus name, or a name already
//! registered as another kind, is logged as an error and the caller gets a detached series that
//! counts but is never rendered. A metrics mistake must not stop a daemon.

mod names;
mod series;

#[cfg(test)]
mod tests;

pub use series::{Counter, Gauge, Histogram};

use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter as PCounter;
use prometheus_client::metrics::family::Family as PFamily;
use prometheus_client::metrics::gauge::Gauge as PGauge;
use prometheus_client::metrics::histogram::Histogram as PHistogram;
use prometheus_client::registry::Registry;
use series::Buckets;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Buckets, in seconds, for wait and latency histograms: 1 ms to 30 s.
pub(crate) const SECONDS_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0,
];

/// The `Content-Type` of [`Metrics::render_prometheus`]'s output.
pub const PROMETHEUS_CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// Label pairs sorted by name: the identity of a series within its family.
type Labels = Vec<(String, String)>;

/// The registry handle; clones share the same registry.
#[derive(Clone, Default)]
pub struct Metrics {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Default)]
struct Inner {
    registry: Registry,
    /// Every registered family by its exposition name (a counter's ends in `_total`).
    families: HashMap<String, Family>,
    /// Counters handed out before, by [`series_hash`] of the name and labels as the caller gave
    /// them: a turn counts several, and asking again skips the checks, the sorted label key and
    /// the family's own map. Holds one entry per series the families hold.
    counters: HashMap<u64, Vec<Resolved>>,
}

/// A counter series as [`Metrics::counter`] was asked for it.
struct Resolved {
    name: String,
    labels: Vec<(String, String)>,
    counter: Counter,
}

impl Resolved {
    fn is(&self, name: &str, labels: &[(&str, &str)]) -> bool {
        self.name == name
            && self.labels.len() == labels.len()
            && self
                .labels
                .iter()
                .zip(labels)
                .all(|((k, v), (ak, av))| k == ak && v == av)
    }
}

/// A hash of a series' name and labels in the caller's order (fixed keys: the same in every
/// process, which only matters for the map it indexes).
fn series_hash(name: &str, labels: &[(&str, &str)]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    name.hash(&mut h);
    labels.hash(&mut h);
    h.finish()
}

/// One registered family; clones share its series with the registry's copy.
#[derive(Clone)]
enum Family {
    Counter(PFamily<Labels, PCounter<u64>>),
    Gauge(PFamily<Labels, PGauge<i64>>),
    Histogram(PFamily<Labels, PHistogram, Buckets>),
}

impl Family {
    fn kind(&self) -> &'static str {
        match self {
            Self::Counter(_) => "counter",
            Self::Gauge(_) => "gauge",
            Self::Histogram(_) => "histogram",
        }
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("families", &self.lock().families.len())
            .finish()
    }
}

impl Metrics {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Poisoning only means a panic elsewhere while holding it; the registry is still sound.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The counter `name{labels}`, registered on first use. By Prometheus convention a counter's
    /// name ends in `_total`; one that does not is exported with `_total` appended.
    pub fn counter(&self, name: &str, help: &str, labels: &[(&str, &str)]) -> Counter {
        let hash = series_hash(name, labels);
        if let Some(known) = self.lock().counters.get(&hash).and_then(|list| {
            list.iter()
                .find(|r| r.is(name, labels))
                .map(|r| r.counter.clone())
        }) {
            return known;
        }
        let base = name.strip_suffix("_total").unwrap_or(name);
        let found = self.family(&format!("{base}_total"), base, help, labels, false, || {
            Family::Counter(PFamily::default())
        });
        let Some((Family::Counter(f), key)) = found else {
            return Counter::default();
        };
        let counter = Counter(f.get_or_create_owned(&key));
        let mut inner = self.lock();
        let list = inner.counters.entry(hash).or_default();
        if !list.iter().any(|r| r.is(name, labels)) {
            list.push(Resolved {
                name: name.to_string(),
                labels: labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                counter: counter.clone(),
            });
        }
        counter
    }

    /// The gauge `name{labels}`, registered on first use.
    pub fn gauge(&self, name: &str, help: &str, labels: &[(&str, &str)]) -> Gauge {
        let found = self.family(name, name, help, labels, false, || {
            Family::Gauge(PFamily::default())
        });
        match found {
            Some((Family::Gauge(f), key)) => Gauge(f.get_or_create_owned(&key)),
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
        let bounds = Buckets::new(buckets);
        let fresh = bounds.clone();
        let found = self.family(name, name, help, labels, true, move || {
            Family::Histogram(PFamily::new_with_constructor(fresh))
        });
        match found {
            Some((Family::Histogram(f), key)) => Histogram(f.get_or_create_owned(&key)),
            _ => bounds.histogram(),
        }
    }

    /// Finds or registers the family exported as `exposed` (registered under `base`, which
    /// `prometheus-client` may extend), with the sorted label key of the series. `None` (logged)
    /// when the name, labels or kind are wrong.
    fn family(
        &self,
        exposed: &str,
        base: &str,
        help: &str,
        labels: &[(&str, &str)],
        le_reserved: bool,
        new: impl FnOnce() -> Family,
    ) -> Option<(Family, Labels)> {
        if !names::is_metric_name(exposed) {
            tracing::error!(
                metric = exposed,
                "Invalid metric name; the series is not exported."
            );
            return None;
        }
        if let Some((bad, _)) = labels
            .iter()
            .find(|(l, _)| !names::is_label_name(l) || (le_reserved && *l == "le"))
        {
            tracing::error!(
                metric = exposed,
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
        let fresh = new();
        let mut inner = self.lock();
        let Inner {
            registry, families, ..
        } = &mut *inner;
        let family = families.entry(exposed.to_string()).or_insert_with(|| {
            // prometheus-client ends every help text with a period of its own.
            let help = help.strip_suffix('.').unwrap_or(help);
            match &fresh {
                Family::Counter(f) => registry.register(base, help, f.clone()),
                Family::Gauge(f) => registry.register(base, help, f.clone()),
                Family::Histogram(f) => registry.register(base, help, f.clone()),
            }
            fresh.clone()
        });
        if family.kind() != fresh.kind() {
            tracing::error!(
                metric = exposed,
                registered = family.kind(),
                requested = fresh.kind(),
                "Metric already registered as another kind; the series is not exported."
            );
            return None;
        }
        Some((family.clone(), key))
    }

    /// The whole registry in the Prometheus text exposition format, version 0.0.4.
    pub fn render_prometheus(&self) -> String {
        let inner = self.lock();
        let mut out = String::new();
        if let Err(e) = prometheus_text::encode(&mut out, &inner.registry) {
            // Writing to a String does not fail; a metric's encoder might.
            tracing::error!(error = %e, "Rendering metrics failed; the output is partial.");
        }
        out
    }
}
