//! What the store keeps beside the ledger's rows: keys made and revoked through the admin
//! API, tenants set through it, and what automatic routers learnt.

/// What an automatic router learnt of one candidate group for one task, as kept across
/// restarts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StoredBelief {
    /// The task.
    pub task: String,
    /// The candidate group.
    pub group: String,
    /// The Beta posterior's alpha (good answers, decayed, with the prior's one).
    pub alpha: f64,
    /// Its beta (bad answers).
    pub beta: f64,
    /// Mean output tokens of its answers, once seen.
    pub output_tokens: Option<f64>,
    /// Mean share of the prompt served from the provider's cache, once seen.
    pub cached_share: Option<f64>,
}

/// A tenant set through the admin API, as kept across restarts: its default lane and its
/// limits (`None`: no limit).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoredTenant {
    /// The tenant's name.
    pub name: String,
    /// The lane of its requests that name none.
    pub lane: Option<String>,
    /// Money it may spend in all, in micro-units.
    pub credits_micros: Option<u64>,
    /// Requests per minute.
    pub rpm: Option<u64>,
    /// Tokens per minute.
    pub tpm: Option<u64>,
    /// Tokens per UTC day.
    pub tokens_per_day: Option<u64>,
    /// Money per UTC month, in micro-units.
    pub spend_per_month_micros: Option<u64>,
}

/// A revoked API key, as kept across restarts: the hash it had, never the key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RevokedKey {
    /// The revoked SHA-256, in hex.
    pub sha256: String,
    /// The key's name when it was revoked.
    pub name: String,
    /// Its tenant.
    pub tenant: String,
    /// When it was revoked (Unix milliseconds).
    pub revoked_ms: i64,
}

/// An API key made at run time, as kept across restarts: its hash, never the key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoredKey {
    /// The key's name.
    pub name: String,
    /// Its tenant.
    pub tenant: String,
    /// The key's SHA-256, in hex.
    pub sha256: String,
    /// The lane of its requests that name none.
    pub lane: Option<String>,
    /// The model groups it may use (empty: all).
    pub models: Vec<String>,
}
