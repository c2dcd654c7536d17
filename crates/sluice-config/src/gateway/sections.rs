//! The gateway configuration's own sections as they are written (server, telemetry, ledger,
//! lanes, tenants, keys, billing, prices; the caches' are in `cache.rs`): one type per table, its
//! defaults, and the checks a single value can have on its own.

use std::time::Duration;

use serde::Deserialize;

use crate::money::Money;

/// Default body limit: 10 MiB.
pub const DEFAULT_MAX_BODY_BYTES: u64 = 10 * 1024 * 1024;
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
    /// Whether requests need an API key; left out, from the moment any key exists (from
    /// `[keys]`, the store or `POST /admin/keys`). `false` serves requests without one.
    pub require_keys: Option<bool>,
    /// Threads that run requests; by default one per CPU core.
    pub worker_threads: Option<usize>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".into(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            shutdown_grace: Duration::from_secs(30),
            shutdown_notice: Duration::ZERO,
            admin_token_env: None,
            require_keys: None,
            worker_threads: None,
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
    pub access_log: AccessLogFormat,
}

/// The access log's format (`[telemetry] access_log`).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AccessLogFormat {
    /// No access log.
    #[default]
    Off,
    /// One JSON object per line.
    Json,
    /// `key=value` pairs.
    Logfmt,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            latency_window: Duration::from_secs(60),
            latency_window_slices: 6,
            access_log: AccessLogFormat::Off,
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

/// `[tenants.NAME]`: what sluice knows of a tenant (requests name theirs in
/// `x-sluice-tenant`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
#[serde(default)]
pub struct TenantConfig {
    /// The lane of the tenant's requests that name none (a `[lanes]` name).
    pub lane: Option<String>,
    /// Its class (`enterprise`, `free`, ...): client latency is reported per lane, group
    /// and class, so a kind of customer's tail can be watched without a series per tenant.
    pub class: Option<String>,
    /// Money it may spend, written in whole currency units (the catalog's); none: no limit.
    pub credits: Option<Money>,
    /// Requests per minute; none: no limit.
    pub rpm: Option<u64>,
    /// Tokens per minute (prompt and output); none: no limit.
    pub tpm: Option<u64>,
    /// Tokens per UTC day; none: no limit.
    pub tokens_per_day: Option<u64>,
    /// Money per UTC month, written in whole currency units; none: no limit.
    pub spend_per_month: Option<Money>,
}

/// `[keys.NAME]`: an API key, known by its SHA-256 (`sluice keys new` makes one).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
#[serde(default)]
pub struct KeyConfig {
    /// The tenant it belongs to.
    pub tenant: String,
    /// The key's SHA-256, 64 hex digits.
    pub sha256: String,
    /// The lane of its requests that name none (else its tenant's).
    pub lane: Option<String>,
    /// The model groups it may use; empty or absent: all.
    pub models: Vec<String>,
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
    pub currency: CurrencyCode,
    /// What one unit of each other currency is worth in `currency` (`{ CNY = 0.14 }`): a
    /// price in a currency without a rate is never converted one for one.
    pub rates: std::collections::BTreeMap<CurrencyCode, f64>,
}

/// An ISO 4217 currency code: three letters, kept in capitals.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CurrencyCode(pub String);

impl Default for CurrencyCode {
    fn default() -> Self {
        Self("USD".into())
    }
}

impl std::fmt::Display for CurrencyCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl CurrencyCode {
    /// `s` in capitals when it is three ASCII letters.
    pub fn parse(s: &str) -> Option<Self> {
        (s.len() == 3 && s.bytes().all(|b| b.is_ascii_alphabetic()))
            .then(|| Self(s.to_ascii_uppercase()))
    }
}

impl<'de> Deserialize<'de> for CurrencyCode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "{s:?} is not a currency code; write three letters, such as USD or CNY"
            ))
        })
    }
}

/// `[prices.MODEL]`: what a million tokens of the upstream model `MODEL` cost, in whole
/// currency units (read once into integer micro-units).
/// `input` and `output` are required: a price that leaves one out is refused, never zero.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PriceConfig {
    /// Input tokens at full price.
    pub input: Money,
    /// Input tokens read from the prompt cache (default: `input`).
    #[serde(default)]
    pub cached_input: Option<Money>,
    /// Input tokens written to the prompt cache (default: `input`).
    #[serde(default)]
    pub cache_write: Option<Money>,
    /// Output tokens.
    pub output: Money,
    /// The currency the amounts are in (default: `[billing] currency`).
    #[serde(default)]
    pub currency: Option<CurrencyCode>,
}

/// `[catalog.MODEL]`: what a model can take and do, read into the catalog's own override.
pub type CatalogConfig = sluice_economy::InfoOverride;
