//! Handles on the metric series and latency windows one (group, upstream, mode) writes on
//! every request, found with one fast-hash lookup rather than a SipHash lookup and a lock
//! per label set. Each handle is made on first use, from its family, so a series appears on
//! `/metrics` exactly when it would without the cache; handles share their family's counts.

use std::hash::{Hash, Hasher};
use std::sync::{Arc, OnceLock};

use hashbrown::{Equivalent, HashMap};
use parking_lot::{Mutex, RwLock};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;

use crate::windows::PairWindows;

/// The series of one (group, upstream, mode), each made on first use.
#[derive(Debug, Default)]
pub(crate) struct Series {
    /// Requests answered 200 with no error.
    pub ok: OnceLock<Counter>,
    /// The group's request and queue durations.
    pub request_seconds: OnceLock<Histogram>,
    pub queue_seconds: OnceLock<Histogram>,
    /// The upstream's successful attempts.
    pub attempt_ok: OnceLock<Counter>,
    /// The pair's time to first byte and total time.
    pub ttfb_seconds: OnceLock<Histogram>,
    /// The pair's percentile windows.
    pub windows: OnceLock<Option<Arc<Mutex<PairWindows>>>>,
    /// Prompt, completion, cached and cache-write tokens.
    pub tokens: OnceLock<[Counter; 4]>,
    pub cost: OnceLock<Counter>,
    /// Per tenant: prompt, cached and cache-write tokens; saved and write-premium money.
    pub prompt_cache: Mutex<HashMap<Option<Arc<str>>, [Counter; 5]>>,
}

/// Owned key: group, upstream, streamed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Key(Arc<str>, Arc<str>, bool);

/// Borrowed key, hashed the same way as [`Key`].
struct KeyRef<'a>(&'a str, &'a str, bool);

fn hash_parts<H: Hasher>(group: &str, upstream: &str, stream: bool, h: &mut H) {
    group.hash(h);
    upstream.hash(h);
    stream.hash(h);
}

impl Hash for Key {
    fn hash<H: Hasher>(&self, h: &mut H) {
        hash_parts(&self.0, &self.1, self.2, h);
    }
}

impl Hash for KeyRef<'_> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        hash_parts(self.0, self.1, self.2, h);
    }
}

impl Equivalent<Key> for KeyRef<'_> {
    fn equivalent(&self, k: &Key) -> bool {
        *k.0 == *self.0 && *k.1 == *self.1 && k.2 == self.2
    }
}

/// Every (group, upstream, mode) seen. Groups and upstreams come from the configuration, so
/// the map is as small as the configuration.
#[derive(Debug, Default)]
pub(crate) struct SeriesCache {
    map: RwLock<HashMap<Key, Arc<Series>>>,
}

impl SeriesCache {
    /// The series of (`group`, `upstream`, `stream`), made empty if new.
    pub fn get(&self, group: &Arc<str>, upstream: &Arc<str>, stream: bool) -> Arc<Series> {
        let probe = KeyRef(group, upstream, stream);
        if let Some(s) = self.map.read().get(&probe) {
            return s.clone();
        }
        self.map
            .write()
            .entry(Key(group.clone(), upstream.clone(), stream))
            .or_default()
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_series_per_group_upstream_and_mode() {
        let cache = SeriesCache::default();
        let (g, u, v) = (Arc::from("g"), Arc::from("u"), Arc::from("v"));
        let a = cache.get(&g, &u, false);
        a.ok.get_or_init(Counter::default).inc();
        // The same names in other allocations find the same series.
        let again = cache.get(&Arc::from("g"), &Arc::from("u"), false);
        assert!(Arc::ptr_eq(&a, &again));
        assert_eq!(again.ok.get().map(Counter::get), Some(1));
        assert!(!Arc::ptr_eq(&a, &cache.get(&g, &u, true)));
        assert!(!Arc::ptr_eq(&a, &cache.get(&g, &v, false)));
        // "gu" + "" is not "g" + "u".
        let gu = cache.get(&Arc::from("gu"), &Arc::from(""), false);
        assert!(!Arc::ptr_eq(&a, &gu));
        assert_eq!(cache.map.read().len(), 4);
    }
}
