//! The exact answer cache kept in Redis for every instance: an answer one instance bought is
//! served by all. Each answer is one value (what it cost, when it was stored on the wall
//! clock, its body) under its request's digest, expiring with the cache's time to live.
//! Keys carry a generation: purging the cache moves it on, and every instance takes the new
//! one within a probe (old answers expire unread). While Redis cannot answer, the cache is
//! skipped: every request goes to the upstream.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use sluice_cache::{AnswerStore, Key, Stored};
use sluice_core::reply::{Reply, later};
use tokio::time::Instant;

use crate::health::{Health, Kind};
use crate::store::Redis;

/// Bytes before an answer's body: its cost and its wall-clock time, both little-endian u64.
const HEAD: usize = 16;

/// Answers every instance shares.
pub struct RedisAnswers {
    redis: Arc<Redis>,
    health: Arc<Health>,
    generation: Arc<AtomicU64>,
    ttl: Duration,
    /// What this instance wrote, by size, kept as long as the answers: what `size` reports.
    written: moka::sync::Cache<Key, u32>,
}

impl std::fmt::Debug for RedisAnswers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisAnswers")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

/// An answer as kept: its head, then its body.
pub fn encode(a: &Stored, now: Instant, wall: SystemTime) -> Vec<u8> {
    let age = now.saturating_duration_since(a.stored_at);
    let stored = crate::wall::ms(wall).saturating_sub(age.as_millis() as u64);
    let mut v = Vec::with_capacity(HEAD + a.body.len());
    v.extend_from_slice(&a.cost_micros.to_le_bytes());
    v.extend_from_slice(&stored.to_le_bytes());
    v.extend_from_slice(&a.body);
    v
}

/// An answer read back at `now` (`wall` on the calendar); `None` when it is not one.
pub fn decode(v: &[u8], now: Instant, wall: SystemTime) -> Option<Stored> {
    let cost = u64::from_le_bytes(v.get(..8)?.try_into().ok()?);
    let stored = u64::from_le_bytes(v.get(8..HEAD)?.try_into().ok()?);
    let age = crate::wall::age(stored, wall);
    Some(Stored {
        body: Bytes::copy_from_slice(v.get(HEAD..)?),
        cost_micros: cost,
        stored_at: now.checked_sub(age).unwrap_or(now),
    })
}

impl RedisAnswers {
    pub(crate) fn new(
        redis: Arc<Redis>,
        health: Arc<Health>,
        generation: Arc<AtomicU64>,
        ttl: Duration,
        max_bytes: u64,
    ) -> Self {
        let written = moka::sync::Cache::builder()
            .max_capacity(max_bytes)
            .weigher(|_: &Key, n: &u32| *n)
            .time_to_live(ttl)
            .build();
        Self {
            redis,
            health,
            generation,
            ttl,
            written,
        }
    }

    fn key(&self, key: &Key) -> String {
        self.redis.key(&format!(
            "answer:{}:{}",
            self.generation.load(Ordering::Relaxed),
            sluice_economy::keys::hex(key)
        ))
    }

    fn send(&self, cmd: redis::Cmd) {
        let (redis, health) = (self.redis.clone(), self.health.clone());
        tokio::spawn(async move {
            if let Err(e) = redis.query::<()>(&cmd).await {
                health.failed(Kind::Caches, &e);
            }
        });
    }
}

impl AnswerStore for RedisAnswers {
    fn get<'a>(&'a self, key: &'a Key) -> Reply<'a, Option<Arc<Stored>>> {
        later(async move {
            if self.health.is_down() {
                return None;
            }
            let got: Option<Vec<u8>> =
                match self.redis.query(redis::cmd("GET").arg(self.key(key))).await {
                    Ok(v) => v,
                    Err(e) => {
                        self.health.failed(Kind::Caches, &e);
                        return None;
                    }
                };
            decode(&got?, Instant::now(), SystemTime::now()).map(Arc::new)
        })
    }

    fn put(&self, key: Key, answer: Arc<Stored>) {
        if self.health.is_down() {
            return;
        }
        let value = encode(&answer, Instant::now(), SystemTime::now());
        self.written
            .insert(key, u32::try_from(value.len()).unwrap_or(u32::MAX));
        let mut cmd = redis::cmd("SET");
        cmd.arg(self.key(&key))
            .arg(value)
            .arg("PX")
            .arg(self.ttl.as_millis().max(1) as u64);
        self.send(cmd);
    }

    fn remove(&self, key: &Key) {
        self.written.invalidate(key);
        let mut cmd = redis::cmd("DEL");
        cmd.arg(self.key(key));
        self.send(cmd);
    }

    fn size(&self) -> (u64, u64) {
        self.written.run_pending_tasks();
        (self.written.entry_count(), self.written.weighted_size())
    }

    fn purge(&self) {
        self.written.invalidate_all();
        // The next generation: this instance's at once, the others' at their next probe.
        self.generation.fetch_add(1, Ordering::Relaxed);
        let mut cmd = redis::cmd("INCR");
        cmd.arg(self.redis.key("answers"));
        self.send(cmd);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_keeps_its_cost_body_and_age_across_instances() {
        let now = Instant::now();
        let a = Stored {
            body: Bytes::from_static(b"{\"id\":\"x\"}"),
            cost_micros: 1234,
            stored_at: now.checked_sub(Duration::from_secs(30)).unwrap_or(now),
        };
        let wall = SystemTime::now();
        let v = encode(&a, now, wall);
        // Read by another instance whose clock reads 10 s later.
        let other = now + Duration::from_secs(10);
        let b = decode(&v, other, wall + Duration::from_secs(10)).unwrap();
        assert_eq!((b.body.clone(), b.cost_micros), (a.body.clone(), 1234));
        let age = other.saturating_duration_since(b.stored_at);
        assert!(
            (39_990..=40_010).contains(&(age.as_millis() as u64)),
            "{age:?}"
        );
        assert!(decode(&v[..10], now, wall).is_none());
    }
}
