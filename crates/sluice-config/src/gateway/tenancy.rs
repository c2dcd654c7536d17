//! `[tenants.NAME]` and `[keys.NAME]`, each table read in parts: what the gateway itself
//! keeps of a tenant (its lane and class) beside its credits and quotas in the economy's
//! [`Limits`]; a key's hash beside what it grants, the economy's [`KeySpec`]. A key no part
//! takes is reported, with the nearest one.

use serde::Deserialize;
use sluice_economy::{KeySpec, Limits};

use crate::diagnostic::Diagnostic;
use crate::document::Document;

/// `[tenants.NAME]`: what sluice knows of a tenant (requests name theirs in
/// `x-sluice-tenant`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TenantConfig {
    /// The lane of the tenant's requests that name none (a `[lanes]` name).
    pub lane: Option<String>,
    /// Its class (`enterprise`, `free`, ...): client latency is reported per lane, group
    /// and class, so a kind of customer's tail can be watched without a series per tenant.
    pub class: Option<String>,
    /// Its credits and quotas, money written in whole currency units; none: no limit.
    pub limits: Limits,
}

/// The keys of a tenant's table that are the gateway's, not its limits.
#[derive(Deserialize, Default)]
#[serde(default)]
struct TenantTags {
    lane: Option<String>,
    class: Option<String>,
}

/// `[keys.NAME]`: an API key, known by its SHA-256 (`sluice keys new` makes one).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KeyConfig {
    /// The key's SHA-256, 64 hex digits.
    pub sha256: String,
    /// What it grants: its tenant, lane and model groups; named after its table.
    pub spec: KeySpec,
}

/// The key of a key's table that is not what it grants.
#[derive(Deserialize, Default)]
#[serde(default)]
struct KeyHash {
    sha256: String,
}

/// Every `[tenants.*]` entry, in file order.
pub(super) fn tenants(
    doc: &Document<'_>,
    diags: &mut Vec<Diagnostic>,
) -> Vec<(String, TenantConfig)> {
    doc.map_tables("tenants", diags, |parts| {
        let tags: Option<TenantTags> = parts.read();
        let limits: Option<Limits> = parts.read();
        parts.finish(|_, _| None);
        let tags = tags?;
        Some(TenantConfig {
            lane: tags.lane,
            class: tags.class,
            limits: limits?,
        })
    })
}

/// Every `[keys.*]` entry, in file order.
pub(super) fn keys(doc: &Document<'_>, diags: &mut Vec<Diagnostic>) -> Vec<(String, KeyConfig)> {
    let mut read = doc.map_tables("keys", diags, |parts| {
        let hash: Option<KeyHash> = parts.read();
        let spec: Option<KeySpec> = parts.read();
        parts.finish(|_, _| None);
        Some(KeyConfig {
            sha256: hash?.sha256,
            spec: spec?,
        })
    });
    for (name, k) in &mut read {
        k.spec.name = name.clone();
    }
    read
}
