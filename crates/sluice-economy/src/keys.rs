//! API keys: each belongs to a tenant and says which lane its requests default to and which
//! model groups they may use. Only a key's SHA-256 is kept; the key itself is shown once, when
//! it is made, and never stored or logged.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use parking_lot::RwLock;
use sha2::{Digest, Sha256};

/// What a key grants. Configuration writes it in a `[keys.NAME]` table, beside the key's
/// hash: this type takes its own keys and leaves the rest for the reader (it denies none),
/// and its name is the table's.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(default)]
pub struct KeySpec {
    /// The key's name (for listing and revoking; not secret).
    #[serde(skip)]
    pub name: String,
    /// The tenant it belongs to.
    pub tenant: Arc<str>,
    /// The lane of its requests that name none.
    pub lane: Option<String>,
    /// The model groups it may use; empty: all.
    pub models: Vec<String>,
}

impl KeySpec {
    /// What is wrong with it on its own, as (field, problem): none when it names a tenant.
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        if self.tenant.trim().is_empty() {
            vec![("tenant", "is required".to_string())]
        } else {
            Vec::new()
        }
    }

    /// Whether the key may use model group `group`.
    pub fn allows(&self, group: &str) -> bool {
        self.models.is_empty() || self.models.iter().any(|m| m == group)
    }
}

/// A key as sluice knows it: what it grants, never the secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiKey {
    /// What it grants.
    pub spec: KeySpec,
    /// The first characters of its SHA-256, to tell keys apart in listings.
    pub fingerprint: String,
    /// When it was made (or loaded).
    pub created: SystemTime,
}

/// Why a key could not be added.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Another key has that name.
    #[error("a key named `{0}` exists")]
    DuplicateName(String),
    /// The stored hash is not 64 hex digits.
    #[error("`{0}` is not a SHA-256 in hex (64 hex digits)")]
    BadHash(String),
}

/// The prefix of every key sluice makes.
pub const KEY_PREFIX: &str = "sk-sluice-";

/// The SHA-256 of `secret`.
pub fn hash(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// The SHA-256 of `secret` in lowercase hex, as configuration files hold it.
pub fn hash_hex(secret: &str) -> String {
    hex(&hash(secret))
}

/// `bytes` in lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

fn parse_hex(text: &str) -> Option<[u8; 32]> {
    let text = text.trim();
    if text.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// A fresh key: the prefix and 244 random bits (two v4 UUIDs), in hex.
pub fn generate() -> String {
    format!(
        "{KEY_PREFIX}{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Where API keys are kept, as every step reads them. One process holds a [`KeyRing`];
/// several instances keep one directory between them by another implementation (each a
/// local copy that keys made and revoked anywhere reach), no step changing.
pub trait KeyDirectory: Send + Sync + std::fmt::Debug {
    /// The key `secret` is, if any.
    fn authenticate(&self, secret: &str) -> Option<Arc<ApiKey>>;
    /// Adds a key known by its hash (from configuration or a store).
    fn insert_hashed(&self, spec: KeySpec, sha256_hex: &str) -> Result<(), KeyError>;
    /// Makes a key for `spec`; returns the key itself, which is not kept.
    fn create(&self, spec: KeySpec) -> Result<String, KeyError>;
    /// Removes the key named `name`; whether there was one.
    fn revoke(&self, name: &str) -> bool;
    /// The key named `name`, with its SHA-256 in hex.
    fn named(&self, name: &str) -> Option<(String, Arc<ApiKey>)>;
    /// Every key, by name.
    fn list(&self) -> Vec<Arc<ApiKey>>;
    /// Whether any key has ever been held, even if every one has since been revoked.
    fn ever_held(&self) -> bool;
    /// Notes that keys were in use, though none is held now.
    fn mark_held(&self);
}

impl KeyDirectory for KeyRing {
    fn authenticate(&self, secret: &str) -> Option<Arc<ApiKey>> {
        KeyRing::authenticate(self, secret)
    }
    fn insert_hashed(&self, spec: KeySpec, sha256_hex: &str) -> Result<(), KeyError> {
        KeyRing::insert_hashed(self, spec, sha256_hex)
    }
    fn create(&self, spec: KeySpec) -> Result<String, KeyError> {
        KeyRing::create(self, spec)
    }
    fn revoke(&self, name: &str) -> bool {
        KeyRing::revoke(self, name)
    }
    fn named(&self, name: &str) -> Option<(String, Arc<ApiKey>)> {
        KeyRing::named(self, name)
    }
    fn list(&self) -> Vec<Arc<ApiKey>> {
        KeyRing::list(self)
    }
    fn ever_held(&self) -> bool {
        KeyRing::ever_held(self)
    }
    fn mark_held(&self) {
        KeyRing::mark_held(self);
    }
}

/// Every key, by hash.
#[derive(Debug, Default)]
pub struct KeyRing {
    keys: RwLock<HashMap<[u8; 32], Arc<ApiKey>>>,
    /// Set by the first key and never cleared: revoking every key must not open the door.
    ever_held: AtomicBool,
}

impl KeyRing {
    /// Adds a key known by its hash (from configuration).
    pub fn insert_hashed(&self, spec: KeySpec, sha256_hex: &str) -> Result<(), KeyError> {
        let h = parse_hex(sha256_hex).ok_or_else(|| KeyError::BadHash(sha256_hex.to_string()))?;
        self.insert(spec, h)
    }

    /// Makes a key for `spec`; returns the key itself, which is not kept.
    pub fn create(&self, spec: KeySpec) -> Result<String, KeyError> {
        let secret = generate();
        self.insert(spec, hash(&secret))?;
        Ok(secret)
    }

    fn insert(&self, spec: KeySpec, h: [u8; 32]) -> Result<(), KeyError> {
        let mut keys = self.keys.write();
        if keys.values().any(|k| k.spec.name == spec.name) {
            return Err(KeyError::DuplicateName(spec.name));
        }
        let key = ApiKey {
            fingerprint: hex(&h[..4]),
            spec,
            created: SystemTime::now(),
        };
        keys.insert(h, Arc::new(key));
        self.ever_held.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// The key `secret` is, if any.
    pub fn authenticate(&self, secret: &str) -> Option<Arc<ApiKey>> {
        self.keys.read().get(&hash(secret)).cloned()
    }

    /// The key named `name`, with its SHA-256 in hex.
    pub fn named(&self, name: &str) -> Option<(String, Arc<ApiKey>)> {
        self.keys
            .read()
            .iter()
            .find(|(_, k)| k.spec.name == name)
            .map(|(h, k)| (hex(h), k.clone()))
    }

    /// Removes the key named `name`; whether there was one.
    pub fn revoke(&self, name: &str) -> bool {
        let mut keys = self.keys.write();
        let before = keys.len();
        keys.retain(|_, k| k.spec.name != name);
        keys.len() < before
    }

    /// Every key, by name.
    pub fn list(&self) -> Vec<Arc<ApiKey>> {
        let mut all: Vec<Arc<ApiKey>> = self.keys.read().values().cloned().collect();
        all.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
        all
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.keys.read().is_empty()
    }

    /// Notes that keys were in use, though none is held now (every one revoked): requests
    /// still need a valid key.
    pub fn mark_held(&self) {
        self.ever_held.store(true, Ordering::Relaxed);
    }

    /// Whether any key has ever been held (from configuration, the store or the admin API),
    /// even if every one has since been revoked.
    pub fn ever_held(&self) -> bool {
        self.ever_held.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, tenant: &str) -> KeySpec {
        KeySpec {
            name: name.into(),
            tenant: Arc::from(tenant),
            lane: None,
            models: vec![],
        }
    }

    #[test]
    fn a_created_key_authenticates_and_only_its_hash_is_kept() {
        let ring = KeyRing::default();
        let secret = ring.create(spec("ci", "acme")).unwrap();
        assert!(secret.starts_with(KEY_PREFIX) && secret.len() == KEY_PREFIX.len() + 64);
        let key = ring.authenticate(&secret).unwrap();
        assert_eq!(&*key.spec.tenant, "acme");
        assert_eq!(key.fingerprint, hash_hex(&secret)[..8]);
        assert!(ring.authenticate(&format!("{secret}x")).is_none());
        assert!(ring.authenticate("").is_none());
        // Nothing a listing shows contains the secret.
        let shown = format!("{:?}", ring.list());
        assert!(!shown.contains(&secret[KEY_PREFIX.len()..]));
        assert_ne!(generate(), generate());
    }

    #[test]
    fn configured_hashes_names_and_revocation() {
        let ring = KeyRing::default();
        let secret = "sk-sluice-from-the-operator";
        ring.insert_hashed(spec("ops", "globex"), &hash_hex(secret))
            .unwrap();
        assert_eq!(&*ring.authenticate(secret).unwrap().spec.tenant, "globex");
        assert_eq!(
            ring.insert_hashed(spec("ops", "x"), &hash_hex("other")),
            Err(KeyError::DuplicateName("ops".into()))
        );
        assert!(matches!(
            ring.insert_hashed(spec("bad", "x"), "abc"),
            Err(KeyError::BadHash(_))
        ));
        let (hash, key) = ring.named("ops").unwrap();
        assert_eq!((hash, &*key.spec.tenant), (hash_hex(secret), "globex"));
        assert!(ring.revoke("ops"));
        assert!(!ring.revoke("ops"));
        assert!(ring.named("ops").is_none());
        assert!(ring.authenticate(secret).is_none());
        assert!(ring.is_empty());
        // Revoking every key does not forget that keys were in use.
        assert!(ring.ever_held());
        assert!(!KeyRing::default().ever_held());
    }

    #[test]
    fn a_key_limited_to_some_models_allows_only_those() {
        let mut s = spec("k", "t");
        assert!(s.allows("anything"));
        s.models = vec!["chat".into()];
        assert!(s.allows("chat"));
        assert!(!s.allows("review"));
    }
}
