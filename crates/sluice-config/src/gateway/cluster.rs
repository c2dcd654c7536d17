//! `[cluster]`: several sluice instances keeping one set of limits, budgets and pacing
//! between them in Redis (or Valkey). Without `redis_url_env` everything stays in each
//! process.

use std::time::Duration;

use serde::Deserialize;

use super::{Env, LedgerConfig, LedgerStoreKind};
use crate::diagnostic::Diagnostic;
use crate::document::{Document, Seg};

/// What budgets do while Redis cannot answer.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum BudgetFallback {
    /// Calls of tenants with credits or quotas are refused (503) until Redis is back.
    #[default]
    FailClosed,
    /// Each instance spends `per_instance_share` of each limit alone.
    LocalShare,
}

/// `[cluster]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
#[serde(default)]
pub struct ClusterConfig {
    /// The environment variable holding the Redis URL (`redis://` or `rediss://` for TLS);
    /// unset: no cluster.
    pub redis_url_env: Option<String>,
    /// Prefixed to every key.
    pub key_prefix: String,
    /// The longest a connection may take to open.
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// The longest a command may take; past it the state it serves counts as degraded.
    #[serde(with = "humantime_serde")]
    pub command_timeout: Duration,
    /// Connections kept open to Redis (each multiplexed).
    pub connections: usize,
    /// What budgets do while Redis cannot answer.
    pub budgets: BudgetFallback,
    /// The share of each limit one instance keeps alone while Redis cannot answer (pacing
    /// always; budgets with `budgets = "local_share"`).
    pub per_instance_share: f64,
    /// How long a reservation stays held before it is charged in full (its instance died).
    #[serde(with = "humantime_serde")]
    pub hold_ttl: Duration,
    /// How often Redis is probed, keys and tenants made elsewhere looked for, and peers'
    /// configurations compared.
    #[serde(with = "humantime_serde")]
    pub probe_every: Duration,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            redis_url_env: None,
            key_prefix: "sluice:".into(),
            connect_timeout: Duration::from_secs(2),
            command_timeout: Duration::from_millis(500),
            connections: 4,
            budgets: BudgetFallback::FailClosed,
            per_instance_share: 0.25,
            hold_ttl: Duration::from_secs(15 * 60),
            probe_every: Duration::from_millis(500),
        }
    }
}

impl ClusterConfig {
    /// Whether instances share state.
    pub fn enabled(&self) -> bool {
        self.redis_url_env.is_some()
    }
}

/// What types cannot check of `[cluster]`.
pub(super) fn check(
    doc: &Document<'_>,
    c: &ClusterConfig,
    ledger: Option<&LedgerConfig>,
    env: &dyn Env,
    diags: &mut Vec<Diagnostic>,
    unset: &mut Vec<Diagnostic>,
    warnings: &mut Vec<Diagnostic>,
) {
    let at = |field: &str| [Seg::Key("cluster".into()), Seg::Key(field.into())];
    if !(c.per_instance_share > 0.0 && c.per_instance_share <= 1.0) {
        diags.push(doc.diag(
            &at("per_instance_share"),
            "must be more than 0 and at most 1",
        ));
    }
    if c.key_prefix.is_empty() {
        diags.push(doc.diag(&at("key_prefix"), "must not be empty"));
    }
    if !(1..=64).contains(&c.connections) {
        diags.push(doc.diag(&at("connections"), "must be 1 to 64"));
    }
    for (field, d) in [
        ("connect_timeout", c.connect_timeout),
        ("command_timeout", c.command_timeout),
        ("probe_every", c.probe_every),
    ] {
        if d < Duration::from_millis(1) {
            diags.push(doc.diag(&at(field), "must be at least 1ms"));
        }
    }
    if c.hold_ttl < Duration::from_secs(1) {
        diags.push(doc.diag(&at("hold_ttl"), "must be at least 1s"));
    }
    let Some(var) = &c.redis_url_env else {
        return;
    };
    match env.get(var) {
        None => unset.push(doc.diag(
            &at("redis_url_env"),
            format!("environment variable `{var}` is not set"),
        )),
        Some(u) => match url::Url::parse(&u) {
            Ok(p) if matches!(p.scheme(), "redis" | "rediss" | "valkey" | "valkeys") => {}
            Ok(p) => diags.push(doc.diag(
                &at("redis_url_env"),
                format!(
                    "`{var}` holds a `{}://` URL; a Redis URL is redis:// (or rediss:// for TLS)",
                    p.scheme()
                ),
            )),
            Err(e) => diags.push(doc.diag(
                &at("redis_url_env"),
                format!("`{var}` does not hold a URL: {e}"),
            )),
        },
    }
    if ledger.is_some_and(|l| l.store != LedgerStoreKind::Postgres) {
        warnings.push(doc.diag(
            &[Seg::Key("cluster".into())],
            "instances share limits and budgets through Redis, but the ledger is not PostgreSQL: \
             each instance keeps its own ledger and batch jobs, keys made through the admin API \
             reach no other instance, a restart restores spend from this instance's ledger alone, \
             and while Redis cannot answer, budgets do what `budgets` says (a PostgreSQL ledger \
             would keep them exact across instances then)",
        ));
    }
    if c.budgets == BudgetFallback::LocalShare {
        warnings.push(doc.diag(
            &at("budgets"),
            format!(
                "while Redis cannot answer (and, with the ledger on PostgreSQL, it cannot \
                 either), each instance spends {:.0}% of each tenant's limits alone: with more \
                 than {} instances, tenants can overspend by the difference",
                c.per_instance_share * 100.0,
                (1.0 / c.per_instance_share).floor()
            ),
        ));
    }
}

impl super::GatewayConfig {
    /// A hash of the sections every instance of a cluster must agree on (tenants, keys,
    /// prices, providers, models, billing, the cluster itself), which each publishes so that
    /// instances running different limits are found.
    pub fn shared_hash(&self) -> String {
        use std::hash::{Hash, Hasher};
        let shared = format!(
            "{:?}",
            (
                &self.tenants,
                &self.keys,
                &self.prices,
                &self.providers,
                &self.models,
                &self.billing,
                &self.cluster,
            )
        );
        let mut h = std::collections::hash_map::DefaultHasher::new();
        shared.hash(&mut h);
        format!("{:016x}", h.finish())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use crate::gateway::{Secrets, check};

    const BASE: &str = "[server]\nlisten = \"127.0.0.1:0\"\n\
        [providers.up]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n\
        [models.chat]\ndeployments = [{ provider = \"up\", model = \"m\" }]\n";

    fn run(extra: &str, url: Option<&str>) -> crate::gateway::Checked {
        let env: BTreeMap<String, String> = url
            .map(|u| ("REDIS_URL".to_string(), u.to_string()))
            .into_iter()
            .collect();
        check(&format!("{BASE}{extra}"), &env, &[], Secrets::Required)
    }

    #[test]
    fn a_cluster_is_checked_and_warned_of() {
        let ok = run(
            "[ledger]\nstore = \"postgres\"\nurl_env = \"REDIS_URL\"\n\
             [cluster]\nredis_url_env = \"REDIS_URL\"\n",
            Some("redis://127.0.0.1:6379"),
        );
        let cfg = ok.config.expect("valid");
        assert!(cfg.cluster.enabled());
        assert!(ok.warnings.0.is_empty(), "{}", ok.warnings);

        let unset = run("[cluster]\nredis_url_env = \"REDIS_URL\"\n", None);
        assert!(
            unset.errors.to_string().contains("`REDIS_URL` is not set"),
            "{}",
            unset.errors
        );

        let http = run(
            "[cluster]\nredis_url_env = \"REDIS_URL\"\n",
            Some("http://x"),
        );
        assert!(
            http.errors.to_string().contains("redis://"),
            "{}",
            http.errors
        );

        let bad = run(
            "[cluster]\nper_instance_share = 1.5\nconnections = 0\n",
            None,
        );
        let said = bad.errors.to_string();
        assert!(
            said.contains("per_instance_share") && said.contains("connections"),
            "{said}"
        );

        // SQLite ledger and a local share: loud warnings naming what they cannot do.
        let warned = run(
            "[cluster]\nredis_url_env = \"REDIS_URL\"\nbudgets = \"local_share\"\n",
            Some("redis://127.0.0.1:6379"),
        );
        let said = warned.warnings.to_string();
        assert!(
            said.contains("not PostgreSQL") && said.contains("overspend"),
            "{said}"
        );
        assert!(said.contains("budgets do what `budgets` says"), "{said}");
    }
}
