//! The exact answer cache: a complete answer kept under a digest of its request and served
//! again, without asking any upstream, to the same request (same tenant, model group and
//! fields) until it expires.
//!
//! The key covers every top-level field of the body byte for byte, in name order (so the
//! order the client wrote them in does not matter), except `stream` and `stream_options`,
//! which say how an answer is delivered, not what it is: a stored answer is served to a
//! stream request replayed as SSE ([`replay`]), and a streamed answer is stored once it has
//! been assembled into a complete one as it passed ([`assemble`]). Tenants never share an
//! entry. Each expires `ttl` after it was stored, on the clock the gateway runs on (virtual
//! in tests). Entries are kept in a [`store`]: in one process, weighed by their body's bytes,
//! the least used going first when it is full (moka's TinyLFU).

pub mod assemble;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
pub mod keep;
pub mod replay;
pub mod semantic;
pub mod store;

pub use replay::ReplayError;
pub use store::{AnswerStore, Answers, LocalAnswers};

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hashbrown::HashMap;
use http::{HeaderMap, header};
use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use sluice_core::ChatRequest;
use tokio::sync::watch;
use tokio::time::Instant;

/// The fields a completion and each of its stream's chunks share, outside the choices.
const HEAD_FIELDS: [&str; 5] = [
    "id",
    "created",
    "model",
    "system_fingerprint",
    "service_tier",
];

/// Fields that say how the answer is delivered, left out of the key.
const DELIVERY_FIELDS: [&str; 2] = ["stream", "stream_options"];

/// A request's digest.
pub type Key = [u8; 32];

/// A stored answer.
#[derive(Debug)]
pub struct Stored {
    /// The complete answer as the client got it (OpenAI JSON).
    pub body: Bytes,
    /// What it cost, in micro-units (what each hit saves).
    pub cost_micros: u64,
    /// When it was stored.
    pub stored_at: Instant,
}

/// What the client asked of the cache, in `Cache-Control`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Directive {
    /// Serve from the cache when it holds the answer; store a fresh one.
    Use,
    /// `no-cache`: ask the upstream, and store its answer.
    Refresh,
    /// `no-store`: neither read nor write the cache.
    Skip,
}

impl Directive {
    /// Reads the request's `Cache-Control` directives (`no-store` wins over `no-cache`;
    /// others are ignored).
    pub fn of(headers: &HeaderMap) -> Self {
        let mut d = Self::Use;
        let values = headers.get_all(header::CACHE_CONTROL).into_iter();
        for text in values.filter_map(|v| v.to_str().ok()) {
            for directive in text.split(',') {
                let name = directive.split('=').next().unwrap_or("").trim();
                if name.eq_ignore_ascii_case("no-store") {
                    return Self::Skip;
                }
                if name.eq_ignore_ascii_case("no-cache") {
                    d = Self::Refresh;
                }
            }
        }
        d
    }
}

impl Stored {
    /// The body to answer with: the stored JSON, or for a stream request the answer replayed
    /// as SSE (an error when it is not a chat completion; the request is then a miss).
    pub fn body_for(&self, stream: bool, include_usage: bool) -> Result<Bytes, ReplayError> {
        if stream {
            replay::frames(&self.body, include_usage)
        } else {
            Ok(self.body.clone())
        }
    }
}

/// The key of `request` for `tenant` in model group `group`.
pub fn key(tenant: Option<&str>, group: &str, request: &ChatRequest) -> Key {
    let mut fields: Vec<(&str, &[u8])> = request
        .fields()
        .filter(|(name, _)| !DELIVERY_FIELDS.contains(name))
        .collect();
    // Stable: a name the client repeated keeps its values' order.
    fields.sort_by(|a, b| a.0.cmp(b.0));
    let mut h = Sha256::new();
    // Every part length-prefixed, so no two different requests write the same bytes.
    let mut part = |bytes: &[u8]| {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    match tenant {
        Some(t) => {
            part(b"tenant");
            part(t.as_bytes());
        }
        None => part(b"no tenant"),
    }
    part(group.as_bytes());
    for (name, value) in fields {
        part(name.as_bytes());
        part(value);
    }
    // A request written in another API may hold what its chat form leaves out (thinking
    // blocks, say): it is keyed whole too.
    // How it is delivered (`stream`) is not part of it, as for the chat form.
    if let Some(o) = request.original() {
        part(o.api.as_bytes());
        match serde_json::from_slice::<serde_json::Value>(&o.body) {
            Ok(mut v) => {
                if let Some(obj) = v.as_object_mut() {
                    obj.remove("stream");
                }
                part(v.to_string().as_bytes());
            }
            Err(_) => part(&o.body),
        }
    }
    h.finalize().into()
}

/// The cache: answers kept in a store, fresh for `ttl` on the gateway's clock, and the
/// requests out for them in this process.
pub struct AnswerCache {
    store: Answers,
    ttl: Duration,
    max_bytes: u64,
    /// Requests out to an upstream whose answers will be stored, by key: an identical
    /// request that arrives meanwhile waits for that answer rather than buy it again. The
    /// receiver is closed when the first request settles.
    in_flight: Mutex<HashMap<Key, watch::Receiver<()>>>,
}

/// What a request that missed does about an identical one already out.
#[derive(Debug)]
pub enum Turn {
    /// None is out: this one goes, and settles the flight when it ends (dropping the
    /// sender wakes those waiting).
    Lead(watch::Sender<()>),
    /// One is out: its end closes this receiver.
    Follow(watch::Receiver<()>),
}

impl std::fmt::Debug for AnswerCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnswerCache")
            .field("ttl", &self.ttl)
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

impl AnswerCache {
    /// A cache whose answers live `ttl` and weigh at most `max_bytes` together, kept in this
    /// process.
    pub fn new(ttl: Duration, max_bytes: u64) -> Self {
        Self::in_store(Arc::new(LocalAnswers::new(ttl, max_bytes)), ttl, max_bytes)
    }

    /// A cache whose answers live `ttl`, kept in `store` (of at most `max_bytes`).
    pub fn in_store(store: Answers, ttl: Duration, max_bytes: u64) -> Self {
        Self {
            store,
            ttl,
            max_bytes,
            in_flight: Mutex::new(HashMap::new()),
        }
    }

    /// The answer stored under `key`, if it is still fresh at `now`.
    pub async fn get(&self, key: &Key, now: Instant) -> Option<Arc<Stored>> {
        let stored = self.store.get(key).await?;
        if now.saturating_duration_since(stored.stored_at) >= self.ttl {
            self.store.remove(key);
            return None;
        }
        Some(stored)
    }

    /// Stores `answer` under `key`.
    pub fn put(&self, key: Key, answer: Stored) {
        self.store.put(key, Arc::new(answer));
    }

    /// Whether the request for `key` goes to the upstream itself or waits for an identical
    /// one already out.
    pub fn turn(&self, key: &Key) -> Turn {
        let mut flights = self.in_flight.lock();
        if let Some(rx) = flights.get(key) {
            return Turn::Follow(rx.clone());
        }
        let (tx, rx) = watch::channel(());
        flights.insert(*key, rx);
        Turn::Lead(tx)
    }

    /// Ends the flight for `key` (its answer stored, or not to be).
    pub fn land(&self, key: &Key) {
        self.in_flight.lock().remove(key);
    }

    /// How long answers live.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The most the answers may weigh together.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Answers held now and what they weigh (pending evictions applied first).
    pub fn size(&self) -> (u64, u64) {
        self.store.size()
    }

    /// Drops every answer; returns how many there were.
    pub fn purge(&self) -> u64 {
        let (n, _) = self.size();
        self.store.purge();
        n
    }
}

#[cfg(test)]
mod tests;
