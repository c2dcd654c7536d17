//! Telemetry fed by call records: Prometheus metrics, rotating percentile windows per
//! (model group, upstream), and the JSON latency report.
//!
//! Everything here reads [`CallRecord`](sluice_core::CallRecord)s; nothing on the request path
//! writes a metric by itself.

pub mod access;
pub mod buckets;
pub mod clients;
pub mod context;
pub mod diagnose;
pub mod history;
pub mod hub;
pub mod metrics;
mod series;
pub mod slo;
pub mod tenant_labels;
pub mod text004;
pub mod windows;

pub use access::{AccessFormat, AccessLog, AccessLogSetting};
pub use hub::{InflightGuard, Telemetry};
pub use tenant_labels::TenantLabels;
pub use windows::{LatencyReport, UpstreamLatency, WindowKey};
