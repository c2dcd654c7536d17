//! The semantic cache's entries kept by every instance: each holds a replica (lookups are
//! many and never wait on Redis) fed from one shared log, to which each appends the entries
//! it stores, what verification taught it of an entry's threshold, and purges. An entry's id
//! counts from its instance's own base, so it names one entry everywhere and a verdict
//! learnt on one instance teaches the others' copy. A newcomer replays the entries still
//! kept; entries older than the cache's time to live (on the wall clock) are not taken.
//! While Redis cannot answer, the cache is skipped, as the exact cache is.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use sluice_cache::Stored;
use sluice_cache::semantic::{Facts, Index, Lookup, Mode, Policy, SemanticEntries, Threshold};
use tokio::time::Instant;

use crate::health::{Health, Kind};
use crate::log::{Logs, Start, Writer};

/// Records the log keeps: about as many entries as a cache holds in a day's busy hour.
const KEEP: usize = 50_000;

/// What one instance tells the others.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "t", rename_all = "snake_case")]
enum Record {
    /// An entry stored.
    Insert {
        partition: u64,
        id: u64,
        vector: Vec<f32>,
        numbers: Vec<String>,
        negations: u32,
        entities: Vec<String>,
        /// Its question's content words (the wording guard's).
        #[serde(default)]
        words: Vec<String>,
        answer: String,
        cost_micros: u64,
        /// When it was stored, in milliseconds of the wall clock.
        stored_ms: u64,
    },
    /// What verification found of an entry.
    Observe {
        partition: u64,
        id: u64,
        similarity: f64,
        right: bool,
    },
    /// Every entry forgotten.
    Purge,
}

/// The entries every instance shares.
pub struct SharedEntries {
    index: Arc<Mutex<Index>>,
    health: Arc<Health>,
    log: Writer,
}

impl std::fmt::Debug for SharedEntries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedEntries").finish_non_exhaustive()
    }
}

impl SharedEntries {
    /// Entries under `policy`, this instance's ids counting from `base`, shared through
    /// `logs`.
    pub(crate) fn new(logs: &Arc<Logs>, health: Arc<Health>, policy: Policy, base: u64) -> Self {
        let index = Arc::new(Mutex::new(Index::with_first_id(policy, base)));
        let replica = index.clone();
        let ttl = policy.ttl;
        let log = logs.topic(
            "semantic",
            Kind::Caches,
            KEEP,
            Start::Kept,
            Arc::new(move |data: &[u8]| {
                apply(&replica, ttl, data, Instant::now(), SystemTime::now())
            }),
        );
        Self { index, health, log }
    }

    fn tell(&self, r: &Record) {
        match serde_json::to_vec(r) {
            Ok(v) => self.log.append(v),
            Err(e) => tracing::error!(error = %e, "a semantic cache record could not be written"),
        }
    }
}

/// Applies another instance's record to the replica at `now` (`wall` on the calendar).
fn apply(index: &Mutex<Index>, ttl: Duration, data: &[u8], now: Instant, wall: SystemTime) {
    let record: Record = match serde_json::from_slice(data) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "a semantic cache record from another instance could not be read; skipped");
            return;
        }
    };
    match record {
        Record::Insert {
            partition,
            id,
            vector,
            numbers,
            negations,
            entities,
            words,
            answer,
            cost_micros,
            stored_ms,
        } => {
            let age = crate::wall::age(stored_ms, wall);
            if age >= ttl {
                return;
            }
            let facts = Facts {
                numbers,
                negations,
                entities: entities.into_iter().collect(),
                words,
            };
            let stored_at = now.checked_sub(age).unwrap_or(now);
            index.lock().insert_as(
                id,
                partition,
                vector,
                facts,
                Bytes::from(answer),
                cost_micros,
                stored_at,
            );
        }
        Record::Observe {
            partition,
            id,
            similarity,
            right,
        } => index.lock().observe(partition, id, similarity, right),
        Record::Purge => index.lock().purge(),
    }
}

impl SemanticEntries for SharedEntries {
    fn policy(&self) -> Policy {
        *self.index.lock().policy()
    }

    fn set_max_bytes(&self, max_bytes: usize) {
        self.index.lock().set_max_bytes(max_bytes);
    }

    #[allow(clippy::too_many_arguments)]
    fn lookup(
        &self,
        partition: u64,
        v: &[f32],
        facts: &Facts,
        now: Instant,
        u: f64,
        mode: Mode,
        pooled: &Threshold,
    ) -> Lookup {
        if self.health.is_down() {
            return Lookup::Miss {
                refused: None,
                best: None,
            };
        }
        self.index
            .lock()
            .lookup(partition, v, facts, now, u, mode, pooled)
    }

    fn answer(&self, partition: u64, id: u64) -> Option<Arc<Stored>> {
        self.index.answer(partition, id)
    }

    fn insert(
        &self,
        partition: u64,
        v: Vec<f32>,
        facts: Facts,
        answer: Bytes,
        cost_micros: u64,
        now: Instant,
    ) -> Option<u64> {
        if self.health.is_down() {
            return None;
        }
        // Answers are JSON; one that is not UTF-8 is kept here and not told.
        let text = std::str::from_utf8(&answer).ok().map(str::to_string);
        let record = text.map(|answer| Record::Insert {
            partition,
            id: 0,
            vector: v.clone(),
            numbers: facts.numbers.clone(),
            negations: facts.negations,
            entities: facts.entities.iter().cloned().collect(),
            words: facts.words.clone(),
            answer,
            cost_micros,
            stored_ms: crate::wall::ms(SystemTime::now()),
        });
        let id = self
            .index
            .lock()
            .insert(partition, v, facts, answer, cost_micros, now)?;
        match record {
            Some(mut r) => {
                if let Record::Insert { id: rid, .. } = &mut r {
                    *rid = id;
                }
                self.tell(&r);
            }
            None => tracing::warn!(
                id,
                "a semantic cache answer is not UTF-8: kept by this instance only"
            ),
        }
        Some(id)
    }

    fn observe(&self, partition: u64, id: u64, similarity: f64, right: bool) {
        self.index.lock().observe(partition, id, similarity, right);
        self.tell(&Record::Observe {
            partition,
            id,
            similarity,
            right,
        });
    }

    fn size(&self) -> (u64, u64) {
        self.index.size()
    }

    fn purge(&self) -> u64 {
        let n = self.index.purge();
        self.tell(&Record::Purge);
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy {
            mode: Mode::Static {
                threshold: 0.9,
                audit: 0.0,
            },
            ttl: Duration::from_secs(60),
            max_bytes: 1 << 20,
        }
    }

    fn insert(id: u64, stored_ms: u64) -> Vec<u8> {
        serde_json::to_vec(&Record::Insert {
            partition: 7,
            id,
            vector: vec![1.0, 0.0],
            numbers: vec!["42".into()],
            negations: 0,
            entities: vec![],
            words: vec![],
            answer: "{\"id\":\"a\"}".into(),
            cost_micros: 900,
            stored_ms,
        })
        .unwrap()
    }

    #[test]
    fn an_entry_told_by_another_instance_is_served_here_until_its_time() {
        let index = Mutex::new(Index::with_first_id(policy(), 1 << 40));
        let (now, wall) = (Instant::now(), SystemTime::now());
        let facts = Facts::of("what is 42?");
        apply(
            &index,
            policy().ttl,
            &insert(5, crate::wall::ms(wall) - 10_000),
            now,
            wall,
        );
        let found = index.lock().lookup(
            7,
            &[1.0, 0.0],
            &facts,
            now,
            0.5,
            policy().mode,
            &Threshold::pooled(),
        );
        assert!(matches!(found, Lookup::Hit { id: 5, .. }), "{found:?}");
        // Taken again (a replay): still one entry.
        apply(
            &index,
            policy().ttl,
            &insert(5, crate::wall::ms(wall) - 10_000),
            now,
            wall,
        );
        assert_eq!(index.lock().len(), 1);
        // Its age came with it: it expires 50 s from now, not 60.
        let later = now + Duration::from_secs(51);
        let found = index.lock().lookup(
            7,
            &[1.0, 0.0],
            &facts,
            later,
            0.5,
            policy().mode,
            &Threshold::pooled(),
        );
        assert!(matches!(found, Lookup::Miss { .. }), "{found:?}");
        // An entry already past its time is not taken; a purge empties the replica.
        apply(
            &index,
            policy().ttl,
            &insert(6, crate::wall::ms(wall) - 61_000),
            now,
            wall,
        );
        assert_eq!(index.lock().len(), 1);
        apply(&index, policy().ttl, b"{\"t\":\"purge\"}", now, wall);
        assert_eq!(index.lock().len(), 0);
        // A record that does not read is skipped.
        apply(&index, policy().ttl, b"{\"t\":\"insert\"}", now, wall);
        assert_eq!(index.lock().len(), 0);
    }
}
