//! What a tenant is called in metric labels (`[telemetry] tenant_labels`): its name, a stable
//! hash of it, or its name only when on an allowlist. Prometheus keeps one series per label
//! value and shows every value to whoever may scrape, so a fleet with many tenants, or names
//! that are themselves sensitive, keeps the series few and the names out.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use sha2::{Digest, Sha256};

/// The label value of calls without a tenant.
pub const NO_TENANT: &str = "-";
/// The label value of tenants not on the allowlist.
pub const OTHER: &str = "other";

/// How tenants are named in labels.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum TenantLabels {
    /// By name (the default): one series per tenant.
    #[default]
    Names,
    /// `t-` and the first 12 hex digits of the name's SHA-256: the same on every instance and
    /// across restarts, so series join up, and no name is shown. A name that can be guessed
    /// can be checked against its hash; an allowlist hides it.
    Hashed,
    /// By name when listed, else `other`: the series are at most the list's length plus one.
    Only(HashSet<String>),
}

impl TenantLabels {
    /// The label value of `tenant` (none, empty and `-` are no tenant).
    pub fn value(&self, tenant: Option<&str>) -> Arc<str> {
        let Some(t) = tenant.filter(|t| !t.is_empty() && *t != NO_TENANT) else {
            return Arc::from(NO_TENANT);
        };
        match self {
            Self::Names => Arc::from(t),
            Self::Hashed => {
                let digest = Sha256::digest(t.as_bytes());
                let hex: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
                Arc::from(format!("t-{hex}"))
            }
            Self::Only(list) if list.contains(t) => Arc::from(t),
            Self::Only(_) => Arc::from(OTHER),
        }
    }
}

impl<'de> serde::Deserialize<'de> for TenantLabels {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Read)
    }
}

/// Reads `"names"`, `"hashed"` or a list of tenant names.
struct Read;

impl<'de> Visitor<'de> for Read {
    type Value = TenantLabels;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"names\", \"hashed\" or a list of the tenant names to show")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        match v {
            "names" => Ok(TenantLabels::Names),
            "hashed" => Ok(TenantLabels::Hashed),
            other => Err(E::custom(format!(
                "unknown value `{other}`: expected \"names\", \"hashed\" or a list of tenant \
                 names"
            ))),
        }
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut list = HashSet::new();
        while let Some(name) = seq.next_element::<String>()? {
            if name.is_empty() || name == OTHER || name == NO_TENANT {
                return Err(de::Error::custom(format!(
                    "`{name}` cannot be listed: it is a label value of its own"
                )));
            }
            list.insert(name);
        }
        Ok(TenantLabels::Only(list))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn names_hashes_and_an_allowlist_label_tenants_as_configured() {
        assert_eq!(&*TenantLabels::Names.value(Some("acme")), "acme");
        assert_eq!(&*TenantLabels::Names.value(None), "-");
        let hashed = TenantLabels::Hashed.value(Some("acme"));
        assert!(hashed.starts_with("t-") && hashed.len() == 14, "{hashed}");
        assert!(!hashed.contains("acme"));
        assert_eq!(hashed, TenantLabels::Hashed.value(Some("acme")), "stable");
        assert_ne!(hashed, TenantLabels::Hashed.value(Some("globex")));
        let only = TenantLabels::Only(HashSet::from(["acme".to_string()]));
        assert_eq!(&*only.value(Some("acme")), "acme");
        assert_eq!(&*only.value(Some("globex")), "other");
        assert_eq!(&*only.value(Some("")), "-");
    }

    #[test]
    fn the_setting_reads_a_word_or_a_list_and_names_what_is_wrong() {
        let read = |s: &str| serde_json::from_str::<TenantLabels>(s);
        assert_eq!(read("\"hashed\"").unwrap(), TenantLabels::Hashed);
        assert_eq!(read("\"names\"").unwrap(), TenantLabels::Names);
        assert_eq!(
            read("[\"acme\"]").unwrap(),
            TenantLabels::Only(HashSet::from(["acme".to_string()]))
        );
        assert!(
            read("\"hash\"")
                .unwrap_err()
                .to_string()
                .contains("unknown value `hash`")
        );
        assert!(
            read("[\"other\"]")
                .unwrap_err()
                .to_string()
                .contains("`other` cannot")
        );
        assert!(
            read("5")
                .unwrap_err()
                .to_string()
                .contains("\"names\", \"hashed\"")
        );
    }
}
