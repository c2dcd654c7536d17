//! The gateway configuration's own sections as they are written (server, telemetry, ledger,
//! billing, prices; the caches' are in `cache.rs`, tenants' and keys' in `tenancy.rs`): one
//! type per table, its defaults, and the checks a single value can have on its own.

use std::time::Duration;

use serde::Deserialize;

use sluice_economy::Currency;
use sluice_telemetry::{AccessLogSetting, TenantLabels};

/// Default body limit: 10 MiB.
pub const DEFAULT_MAX_BODY_BYTES: u64 = 10 * 1024 * 1024;
/// Default time a client has to send a request's headers: 30 s.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(30);
/// Default longest a client may pause mid-request or leave an answer untaken: 60 s.
pub const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Default largest request head: 64 KiB.
pub const DEFAULT_MAX_HEADER_BYTES: u64 = 64 * 1024;
/// Most request threads `[server] worker_threads` may ask for.
pub const MAX_WORKER_THREADS: usize = 1024;

/// `[server]`: the listener and request limits.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
#[serde(default)]
pub struct ServerConfig {
    /// Address to listen on.
    pub listen: String,
    /// Largest request body accepted; larger ones get 413.
    pub max_body_bytes: u64,
    /// How long in-flight requests may run after SIGTERM/SIGINT before they are cut.
    #[serde(with = "humantime_serde")]
    pub shutdown_grace: Duration,
    /// How long after the signal sluice keeps its port open answering 503 (to `/readyz` and
    /// to new requests) even when nothing is in flight, so a load balancer probing
    /// readiness sees it go; at most `shutdown_grace`.
    #[serde(with = "humantime_serde")]
    pub shutdown_notice: Duration,
    /// Environment variable holding the token `/admin/*` requires (`Authorization: Bearer`).
    /// Without it the read-only admin routes are open and the key routes are off.
    pub admin_token_env: Option<String>,
    /// Environment variable holding the token `/metrics` requires (`Authorization: Bearer`;
    /// the admin token is taken too). Without it `/metrics` is open.
    pub metrics_token_env: Option<String>,
    /// Whether requests need an API key; left out, from the moment any key exists (from
    /// `[keys]`, the store or `POST /admin/keys`). `false` serves requests without one.
    pub require_keys: Option<bool>,
    /// Threads that run requests; by default one per CPU core.
    pub worker_threads: Option<usize>,
    /// Client connections open at once at most; one past it is closed as it arrives. Left
    /// out: three quarters of the file descriptors the process may open (the rest are for
    /// upstream connections and files).
    pub max_connections: Option<usize>,
    /// How long a client has to send a request's headers, and how long an idle keep-alive
    /// connection is kept waiting for its next request; then it is closed.
    #[serde(with = "humantime_serde")]
    pub header_timeout: Duration,
    /// The longest a client may pause while it sends a request's body, or leave the next
    /// piece of an answer untaken (a slow reader), before its request is ended (408 for a
    /// body; the connection closed for an answer, the upstream's usage read on for the bill).
    #[serde(with = "humantime_serde")]
    pub stall_timeout: Duration,
    /// Largest request head (request line and headers) accepted; larger ones get 431.
    pub max_header_bytes: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".into(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            shutdown_grace: Duration::from_secs(30),
            shutdown_notice: Duration::ZERO,
            admin_token_env: None,
            metrics_token_env: None,
            require_keys: None,
            worker_threads: None,
            max_connections: None,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            stall_timeout: DEFAULT_STALL_TIMEOUT,
            max_header_bytes: DEFAULT_MAX_HEADER_BYTES,
        }
    }
}

/// `[telemetry]`: percentile windows.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
#[serde(default)]
pub struct TelemetryConfig {
    /// The span the latency percentiles describe.
    #[serde(with = "humantime_serde")]
    pub latency_window: Duration,
    /// How many slices the window rotates in.
    pub latency_window_slices: u32,
    /// One line per finished request on standard output: `off` (the default), `json` or
    /// `logfmt`.
    pub access_log: AccessLogSetting,
    /// What tenants are called in metric labels: `names` (the default), `hashed` (a stable
    /// hash), or a list of the names to show (the rest are `other`).
    pub tenant_labels: TenantLabels,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            latency_window: Duration::from_secs(60),
            latency_window_slices: 6,
            access_log: AccessLogSetting::Off,
            tenant_labels: TenantLabels::Names,
        }
    }
}

/// Which database keeps the usage ledger.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LedgerStoreKind {
    /// An embedded SQLite file (write-ahead log).
    #[default]
    Sqlite,
    /// A PostgreSQL database, for several gateways or a long history.
    Postgres,
    /// No ledger.
    Off,
}

/// When an embedded-ledger commit counts as done.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LedgerDurability {
    /// Every commit is flushed to the disk: survives power loss.
    #[default]
    Disk,
    /// Survives a crash of sluice (kill -9), not of the machine; faster.
    Process,
}

/// `[ledger]`: where each call's usage row is kept.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
#[serde(default)]
pub struct LedgerConfig {
    /// `sqlite` (the default), `postgres` or `off`.
    pub store: LedgerStoreKind,
    /// The SQLite file; a relative path is taken from the config file's folder.
    pub path: std::path::PathBuf,
    /// For `postgres`: the environment variable holding the database URL (it carries a
    /// password, so it never sits in the file).
    pub url_env: Option<String>,
    /// For `sqlite`: `disk` (the default) or `process`.
    pub durability: LedgerDurability,
}

impl Default for LedgerConfig {
    fn default() -> Self {
        Self {
            store: LedgerStoreKind::Sqlite,
            path: "sluice-ledger.db".into(),
            url_env: None,
            durability: LedgerDurability::Disk,
        }
    }
}

/// `[billing]`: how calls are charged.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
#[serde(default)]
pub struct BillingConfig {
    /// What a call to a model with no price gets.
    pub unpriced: sluice_economy::Unpriced,
    /// The currency tenants are billed in: their credits, spend quotas, costs in the
    /// ledger and reports (default USD).
    pub currency: Currency,
    /// What one unit of each other currency is worth in `currency` (`{ CNY = 0.14 }`): a
    /// price in a currency without a rate is never converted one for one.
    pub rates: std::collections::BTreeMap<Currency, f64>,
}

/// `[prices.MODEL]`: what a million tokens of the upstream model `MODEL` cost, in whole
/// currency units (read once into integer micro-units), in the economy's own type.
pub type PriceConfig = sluice_economy::PriceParams;

/// `[catalog.MODEL]`: what a model can take and do, read into the catalog's own override.
pub type CatalogConfig = sluice_economy::InfoOverride;
