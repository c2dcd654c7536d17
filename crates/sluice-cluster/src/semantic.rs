//! The semantic cache's entries kept by every instance: each holds a replica (lookups are
//! many and never wait on Redis) fed from one shared log, to which each appends the entries
//! it stores, what verification taught it of an entry's threshold, and purges. An entry's id
//! counts from its instance's own base, so it names one entry everywhere and a verdict
//! learnt on one instance teaches the others' copy. A newcomer replays the entries still
//! kept; entries older than the cache's time to live (on the wall clock) are not taken.
//! While Redis cannot answer, the cache is skipped, as the exact cache is.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use sluice_cache::Stored;
use sluice_cache::semantic::{
    Facts, Index, Lookup, Mode, Policy, SemanticEntries, Threshold, Verdict,
};
use tokio::time::Instant;

use crate::health::{Health, Kind};
use crate::log::{Logs, Start, Writer};

/// Records the log keeps: about as many entries as a cache holds in a day's busy hour.
const KEEP: usize = 50_000;

/// Other instances' verdicts held for the pooled curves until the next lookup reads them;
/// beyond as many as the log keeps, the oldest are dropped (counted in a warning).
const INBOX: usize = KEEP;

/// Other instances' verdicts not yet read by this one's lookups.
#[derive(Default)]
struct Inbox {
    verdicts: VecDeque<Verdict>,
    dropped: u64,
}

impl Inbox {
    fn push(&mut self, v: Verdict) {
        if self.verdicts.len() >= INBOX {
            self.verdicts.pop_front();
            self.dropped += 1;
            if self.dropped.is_power_of_two() {
                tracing::warn!(
                    dropped = self.dropped,
                    "other instances' semantic cache verdicts were dropped unread (no lookups here)"
                );
            }
        }
        self.verdicts.push_back(v);
    }
}

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
        /// The route whose would-be hit it verified (its pooled curve learns it too); none
        /// for a client's report of a served hit.
        #[serde(default)]
        route: Option<String>,
        similarity: f64,
        right: bool,
    },
    /// Every entry forgotten.
    Purge,
}

/// The entries every instance shares.
pub struct RedisEntries {
    index: Arc<Mutex<Index>>,
    inbox: Arc<Mutex<Inbox>>,
    health: Arc<Health>,
    log: Writer,
}

impl std::fmt::Debug for RedisEntries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisEntries").finish_non_exhaustive()
    }
}

impl RedisEntries {
    /// Entries under `policy`, this instance's ids counting from `base`, shared through
    /// `logs`.
    pub(crate) fn new(logs: &Arc<Logs>, health: Arc<Health>, policy: Policy, base: u64) -> Self {
        let index = Arc::new(Mutex::new(Index::with_first_id(policy, base)));
        let replica = index.clone();
        let inbox = Arc::new(Mutex::new(Inbox::default()));
        let to = inbox.clone();
        let ttl = policy.ttl;
        let log = logs.topic(
            "semantic",
            Kind::Caches,
            KEEP,
            Start::Kept,
            Arc::new(move |data: &[u8]| {
                apply(&replica, &to, ttl, data, Instant::now(), SystemTime::now())
            }),
        );
        Self {
            index,
            inbox,
            health,
            log,
        }
    }

    fn tell(&self, r: &Record) {
        match serde_json::to_vec(r) {
            Ok(v) => self.log.append(v),
            Err(e) => tracing::error!(error = %e, "a semantic cache record could not be written"),
        }
    }
}

/// Applies another instance's record to the replica at `now` (`wall` on the calendar); a
/// verdict waits in `inbox` for the pooled curves.
fn apply(
    index: &Mutex<Index>,
    inbox: &Mutex<Inbox>,
    ttl: Duration,
    data: &[u8],
    now: Instant,
    wall: SystemTime,
) {
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
            route,
            similarity,
            right,
        } => {
            index.lock().observe(partition, id, similarity, right);
            if let Some(route) = route {
                inbox.lock().push(Verdict {
                    route: Arc::from(route),
                    similarity,
                    right,
                });
            }
        }
        Record::Purge => index.lock().purge(),
    }
}

impl SemanticEntries for RedisEntries {
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

    fn observe(&self, partition: u64, id: u64, route: Option<&str>, similarity: f64, right: bool) {
        self.index.lock().observe(partition, id, similarity, right);
        self.tell(&Record::Observe {
            partition,
            id,
            route: route.map(str::to_string),
            similarity,
            right,
        });
    }

    fn learnt_elsewhere(&self) -> Vec<Verdict> {
        let mut inbox = self.inbox.lock();
        inbox.verdicts.drain(..).collect()
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
        let inbox = Mutex::new(Inbox::default());
        let (now, wall) = (Instant::now(), SystemTime::now());
        let facts = Facts::of("what is 42?");
        apply(
            &index,
            &inbox,
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
            &inbox,
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
            &inbox,
            policy().ttl,
            &insert(6, crate::wall::ms(wall) - 61_000),
            now,
            wall,
        );
        assert_eq!(index.lock().len(), 1);
        apply(
            &index,
            &inbox,
            policy().ttl,
            b"{\"t\":\"purge\"}",
            now,
            wall,
        );
        assert_eq!(index.lock().len(), 0);
        // A record that does not read is skipped.
        apply(
            &index,
            &inbox,
            policy().ttl,
            b"{\"t\":\"insert\"}",
            now,
            wall,
        );
        assert_eq!(index.lock().len(), 0);
    }

    #[test]
    fn another_instances_verdict_waits_for_the_pooled_curves() {
        let index = Mutex::new(Index::with_first_id(policy(), 1 << 40));
        let inbox = Mutex::new(Inbox::default());
        let (now, wall) = (Instant::now(), SystemTime::now());
        let observe = |route: Option<&str>| {
            serde_json::to_vec(&Record::Observe {
                partition: 7,
                id: 5,
                route: route.map(str::to_string),
                similarity: 0.93,
                right: true,
            })
            .unwrap()
        };
        apply(
            &index,
            &inbox,
            policy().ttl,
            &observe(Some("qa")),
            now,
            wall,
        );
        // A record written before verdicts named their route teaches the entry alone.
        apply(&index, &inbox, policy().ttl, &observe(None), now, wall);
        let got: Vec<Verdict> = inbox.lock().verdicts.drain(..).collect();
        assert_eq!(
            got,
            vec![Verdict {
                route: Arc::from("qa"),
                similarity: 0.93,
                right: true
            }]
        );
        // Unread verdicts are bounded.
        let mut full = Inbox::default();
        for _ in 0..INBOX + 3 {
            full.push(got[0].clone());
        }
        assert_eq!((full.verdicts.len(), full.dropped), (INBOX, 3));
    }
}
