//! `/metrics`, in Prometheus text: per-route request counts and latency histograms, per-tenant
//! records and bytes written and read, auth refusals by reason, and — when the gateway was
//! given its cell's node counters ([`NodeStats`]) — each node's rounds, syncs, campaigns and
//! leaderships won.

use std::sync::{Arc, Mutex};

use paros_core::{NodeId, TenantId};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric as _};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::metrics::TypedMetric as _;
use prometheus_client::registry::Registry;

use crate::auth::Refusal;

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

/// A tenant's traffic in one direction: `direction` is `written` or `read`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TrafficLabels {
    /// The tenant id, as it travels (16 lowercase hex digits).
    pub tenant: String,
    pub direction: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusalLabels {
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeLabels {
    node: String,
}

fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_5, 2.0, 16))
}

/// One node's counters, cumulative since the node booted (the overview's `counters`; the node
/// id travels beside them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct NodeCounters {
    #[serde(skip)]
    pub node: NodeId,
    /// Rounds run (one storage batch each at most).
    pub rounds: u64,
    /// Rounds that wrote a batch and synced.
    pub syncs: u64,
    /// Write ops persisted.
    pub writes: u64,
    /// Records in write verdicts answered `Accepted` by this node.
    pub records_accepted: u64,
    /// Campaigns this node's voters started.
    pub campaigns: u64,
    /// Campaigns that won: a voter here became its journal's leader.
    pub leaderships_won: u64,
}

impl NodeCounters {
    /// A node host's counters.
    #[must_use]
    pub fn of_host(node: NodeId, s: &paros_node::HostStats) -> NodeCounters {
        NodeCounters {
            node,
            rounds: s.rounds,
            syncs: s.syncs,
            writes: s.writes,
            records_accepted: s.records_accepted,
            campaigns: s.campaigns,
            leaderships_won: s.leaderships_won,
        }
    }
}

/// The port through which a gateway learns its cell's node counters (`paros dev` gives it the
/// embedded cell's; a gateway started without one shows no node counters).
pub trait NodeStats: Send + Sync + 'static {
    /// Every node's counters now.
    fn node_stats(&self) -> Vec<NodeCounters>;
}

impl<F> NodeStats for F
where
    F: Fn() -> Vec<NodeCounters> + Send + Sync + 'static,
{
    fn node_stats(&self) -> Vec<NodeCounters> {
        self()
    }
}

/// The node counters, read from the port at each scrape.
struct NodeCollector(Arc<dyn NodeStats>);

impl std::fmt::Debug for NodeCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NodeCollector")
    }
}

type NodeField = (&'static str, &'static str, fn(&NodeCounters) -> u64);

/// The node families: name, help, value.
const NODE_FAMILIES: [NodeField; 4] = [
    ("node_rounds", "Rounds each node ran", |c| c.rounds),
    ("node_syncs", "Rounds each node made durable with a sync", |c| c.syncs),
    ("node_campaigns", "Campaigns each node's voters started", |c| c.campaigns),
    ("node_leaderships_won", "Campaigns each node's voters won", |c| c.leaderships_won),
];

impl Collector for NodeCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let stats = self.0.node_stats();
        for (name, help, value) in NODE_FAMILIES {
            let mut family = encoder.encode_descriptor(name, help, None, ConstCounter::<u64>::TYPE)?;
            for c in &stats {
                let labels = NodeLabels { node: c.node.to_string() };
                ConstCounter::new(value(c)).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

/// A tenant's traffic through this gateway, cumulative since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    pub records_written: u64,
    pub bytes_written: u64,
    pub records_read: u64,
    pub bytes_read: u64,
}

impl Traffic {
    /// The sum of two tallies.
    #[must_use]
    pub fn plus(self, o: Traffic) -> Traffic {
        Traffic {
            records_written: self.records_written + o.records_written,
            bytes_written: self.bytes_written + o.bytes_written,
            records_read: self.records_read + o.records_read,
            bytes_read: self.bytes_read + o.bytes_read,
        }
    }
}

const WRITTEN: &str = "written";
const READ: &str = "read";

/// The gateway's metrics, in their own registry (no global recorder).
pub struct Metrics {
    registry: Mutex<Registry>,
    pub requests: Family<RouteLabels, Counter>,
    pub latency: Family<LatencyLabels, Histogram, fn() -> Histogram>,
    /// Records accepted (written) or answered (read), per tenant.
    pub records: Family<TrafficLabels, Counter>,
    /// Decoded record bytes accepted (written) or answered (read), per tenant.
    pub bytes: Family<TrafficLabels, Counter>,
    pub auth_refusals: Family<RefusalLabels, Counter>,
    /// Every tenant's traffic added up.
    total: Mutex<Traffic>,
    nodes: Option<Arc<dyn NodeStats>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").field("nodes", &self.nodes.is_some()).finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new(None)
    }
}

impl Metrics {
    /// The gateway's metrics; `nodes` adds the node families, read from it at each scrape.
    #[must_use]
    pub fn new(nodes: Option<Arc<dyn NodeStats>>) -> Metrics {
        let mut registry = Registry::with_prefix("paros_gateway");
        let requests = Family::<RouteLabels, Counter>::default();
        let latency = Family::<LatencyLabels, Histogram, fn() -> Histogram>::new_with_constructor(latency_histogram as fn() -> Histogram);
        let records = Family::<TrafficLabels, Counter>::default();
        let bytes = Family::<TrafficLabels, Counter>::default();
        let auth_refusals = Family::<RefusalLabels, Counter>::default();
        registry.register("requests", "HTTP requests answered, by route and status", requests.clone());
        registry.register("request_duration_seconds", "HTTP request latency, by route", latency.clone());
        registry.register("tenant_records", "Records written (accepted) and read (answered), by tenant", records.clone());
        registry.register("tenant_bytes", "Decoded record bytes written (accepted) and read (answered), by tenant", bytes.clone());
        registry.register("auth_refusals", "Requests refused 401, by reason", auth_refusals.clone());
        // Every reason is listed from the start, at 0, so a dashboard can rate it at once.
        for r in Refusal::ALL {
            let _ = auth_refusals.get_or_create(&RefusalLabels { reason: r.as_str() });
        }
        if let Some(port) = &nodes {
            registry.register_collector(Box::new(NodeCollector(Arc::clone(port))));
        }
        Metrics { registry: Mutex::new(registry), requests, latency, records, bytes, auth_refusals, total: Mutex::default(), nodes }
    }

    /// The node counters now, when the gateway was given the port.
    #[must_use]
    pub fn node_stats(&self) -> Option<Vec<NodeCounters>> {
        self.nodes.as_ref().map(|n| n.node_stats())
    }

    /// Counts one answered request.
    pub fn observe(&self, method: &str, route: &str, status: u16, seconds: f64) {
        self.requests.get_or_create(&RouteLabels { method: method.to_owned(), route: route.to_owned(), status }).inc();
        self.latency.get_or_create(&LatencyLabels { method: method.to_owned(), route: route.to_owned() }).observe(seconds);
    }

    /// Counts one refused token.
    pub fn refused(&self, reason: Refusal) {
        self.auth_refusals.get_or_create(&RefusalLabels { reason: reason.as_str() }).inc();
    }

    fn count(&self, tenant: TenantId, direction: &'static str, records: u64, bytes: u64) {
        let labels = TrafficLabels { tenant: crate::auth::tenant_text(tenant), direction };
        self.records.get_or_create(&labels).inc_by(records);
        self.bytes.get_or_create(&labels).inc_by(bytes);
        let mut total = self.total.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let add = if direction == WRITTEN {
            Traffic { records_written: records, bytes_written: bytes, ..Traffic::default() }
        } else {
            Traffic { records_read: records, bytes_read: bytes, ..Traffic::default() }
        };
        *total = total.plus(add);
    }

    /// Counts records a Write put in a tenant's journal (accepted, not duplicates).
    pub fn written(&self, tenant: TenantId, records: u64, bytes: u64) {
        self.count(tenant, WRITTEN, records, bytes);
    }

    /// Counts the records a Read page or a tail event answered a tenant.
    pub fn read(&self, tenant: TenantId, records: &[bytes::Bytes]) {
        self.count(tenant, READ, records.len() as u64, records.iter().map(|r| r.len() as u64).sum());
    }

    /// A tenant's traffic so far (zero for a tenant that had none: nothing is created).
    #[must_use]
    pub fn traffic(&self, tenant: TenantId) -> Traffic {
        let tenant = crate::auth::tenant_text(tenant);
        let get = |f: &Family<TrafficLabels, Counter>, direction| f.get(&TrafficLabels { tenant: tenant.clone(), direction }).map_or(0, |c| c.get());
        Traffic {
            records_written: get(&self.records, WRITTEN),
            bytes_written: get(&self.bytes, WRITTEN),
            records_read: get(&self.records, READ),
            bytes_read: get(&self.bytes, READ),
        }
    }

    /// Every tenant's traffic so far, added up.
    #[must_use]
    pub fn total(&self) -> Traffic {
        *self.total.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
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
