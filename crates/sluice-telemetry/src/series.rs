//! Handles on the metric series and latency windows one (group, upstream, lane, tenant
//! class, mode) writes on every request, found with one fast-hash lookup rather than a SipHash lookup and a lock
//! per label set. Each handle is made on first use, from its family, so a series appears on
//! `/metrics` exactly when it would without the cache; handles share their family's counts.

use std::hash::{Hash, Hasher};
use std::sync::{Arc, OnceLock};

use hashbrown::{Equivalent, HashMap};
use parking_lot::{Mutex, RwLock};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;

use crate::clients::ClientWindows;
use crate::windows::PairWindows;

/// The series of one (group, upstream, lane, class, mode), each made on first use.
#[derive(Debug, Default)]
pub(crate) struct Series {
    /// Requests answered 200 with no error.
    pub ok: OnceLock<Counter>,
    /// What the caller waited for the last byte and the first, and the queue, per lane, group
    /// and class.
    pub request_seconds: OnceLock<Histogram>,
    pub request_ttfb_seconds: OnceLock<Histogram>,
    pub queue_seconds: OnceLock<Histogram>,
    /// The (lane, group, class)'s client windows.
    pub client: OnceLock<Option<Arc<Mutex<ClientWindows>>>>,
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

/// What a request's series are kept by: its group, upstream, lane and tenant class (each
/// from the configuration, or `-`), and whether it streamed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SeriesKey<'a> {
    pub group: &'a Arc<str>,
    pub upstream: &'a Arc<str>,
    pub lane: &'a Arc<str>,
    pub class: &'a Arc<str>,
    pub stream: bool,
}

/// Owned key: group, upstream, lane, class, streamed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Key(Arc<str>, Arc<str>, Arc<str>, Arc<str>, bool);

/// Borrowed key, hashed the same way as [`Key`].
struct KeyRef<'a>(&'a str, &'a str, &'a str, &'a str, bool);

fn hash_parts<H: Hasher>(parts: [&str; 4], stream: bool, h: &mut H) {
    for p in parts {
        p.hash(h);
    }
    stream.hash(h);
}

impl Hash for Key {
    fn hash<H: Hasher>(&self, h: &mut H) {
        hash_parts([&self.0, &self.1, &self.2, &self.3], self.4, h);
    }
}

impl Hash for KeyRef<'_> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        hash_parts([self.0, self.1, self.2, self.3], self.4, h);
    }
}

impl Equivalent<Key> for KeyRef<'_> {
    fn equivalent(&self, k: &Key) -> bool {
        *k.0 == *self.0 && *k.1 == *self.1 && *k.2 == *self.2 && *k.3 == *self.3 && k.4 == self.4
    }
}

/// Every key seen. Groups, upstreams, lanes and classes come from the configuration, so the
/// map is as small as the configuration.
#[derive(Debug, Default)]
pub(crate) struct SeriesCache {
    map: RwLock<HashMap<Key, Arc<Series>>>,
}

impl SeriesCache {
    /// The series of `k`, made empty if new.
    pub fn get(&self, k: SeriesKey<'_>) -> Arc<Series> {
        let probe = KeyRef(k.group, k.upstream, k.lane, k.class, k.stream);
        if let Some(s) = self.map.read().get(&probe) {
            return s.clone();
        }
        let key = Key(
            k.group.clone(),
            k.upstream.clone(),
            k.lane.clone(),
            k.class.clone(),
            k.stream,
        );
        self.map.write().entry(key).or_default().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_series_per_group_upstream_lane_class_and_mode() {
        let cache = SeriesCache::default();
        let (g, u, v) = (Arc::from("g"), Arc::from("u"), Arc::from("v"));
        let (lane, batch, class) = (Arc::from("interactive"), Arc::from("batch"), Arc::from("-"));
        let key = |group, upstream, lane, stream| SeriesKey {
            group,
            upstream,
            lane,
            class: &class,
            stream,
        };
        let a = cache.get(key(&g, &u, &lane, false));
        a.ok.get_or_init(Counter::default).inc();
        // The same names in other allocations find the same series.
        let (g2, u2, l2) = (Arc::from("g"), Arc::from("u"), Arc::from("interactive"));
        let again = cache.get(key(&g2, &u2, &l2, false));
        assert!(Arc::ptr_eq(&a, &again));
        assert_eq!(again.ok.get().map(Counter::get), Some(1));
        assert!(!Arc::ptr_eq(&a, &cache.get(key(&g, &u, &lane, true))));
        assert!(!Arc::ptr_eq(&a, &cache.get(key(&g, &v, &lane, false))));
        assert!(!Arc::ptr_eq(&a, &cache.get(key(&g, &u, &batch, false))));
        // "gu" + "" is not "g" + "u".
        let (gu, empty) = (Arc::from("gu"), Arc::from(""));
        assert!(!Arc::ptr_eq(&a, &cache.get(key(&gu, &empty, &lane, false))));
        assert_eq!(cache.map.read().len(), 5);
    }
}
