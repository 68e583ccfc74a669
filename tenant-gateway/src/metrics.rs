//! `/metrics`: per-route request counts and latency histograms, in Prometheus text.

use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub method: String,
    pub route: String,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LatencyLabels {
    pub method: String,
    pub route: String,
}

fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_5, 2.0, 16))
}

/// The gateway's metrics, in their own registry (no global recorder).
#[derive(Debug)]
pub struct Metrics {
    registry: Mutex<Registry>,
    pub requests: Family<RouteLabels, Counter>,
    pub latency: Family<LatencyLabels, Histogram, fn() -> Histogram>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("paros_gateway");
        let requests = Family::<RouteLabels, Counter>::default();
        let latency = Family::<LatencyLabels, Histogram, fn() -> Histogram>::new_with_constructor(latency_histogram as fn() -> Histogram);
        registry.register("requests", "HTTP requests answered, by route and status", requests.clone());
        registry.register("request_duration_seconds", "HTTP request latency, by route", latency.clone());
        Metrics { registry: Mutex::new(registry), requests, latency }
    }
}

impl Metrics {
    /// Counts one answered request.
    pub fn observe(&self, method: &str, route: &str, status: u16, seconds: f64) {
        self.requests.get_or_create(&RouteLabels { method: method.to_owned(), route: route.to_owned(), status }).inc();
        self.latency.get_or_create(&LatencyLabels { method: method.to_owned(), route: route.to_owned() }).observe(seconds);
    }

    /// The Prometheus text exposition.
    #[must_use]
    pub fn render(&self) -> String {
        let mut out = String::new();
        let registry = self.registry.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
        out
    }
}
