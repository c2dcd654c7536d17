//! The index's decisions: partitions, guards, both modes, time to live, the size bound.

use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::*;

/// A unit vector at angle `a` (radians) in the plane of the first two axes, padded to 8.
fn at(a: f64) -> Vec<f32> {
    let mut v = vec![0.0_f32; 8];
    v[0] = a.cos() as f32;
    v[1] = a.sin() as f32;
    v
}

fn policy(mode: Mode) -> Policy {
    Policy {
        mode,
        ttl: Duration::from_secs(60),
        max_bytes: 1 << 20,
    }
}

const STATIC: Mode = Mode::Static {
    threshold: 0.9,
    audit: 0.0,
};

/// A lookup under the index's own mode.
fn look(ix: &Index, partition: u64, v: &[f32], f: &Facts, now: Instant, u: f64) -> Lookup {
    ix.lookup(
        partition,
        v,
        f,
        now,
        u,
        ix.policy().mode,
        &Threshold::pooled(),
    )
}

/// An entry with `id` and `facts`, stored at `now`.
pub(super) fn entry(id: u64, facts: Facts, now: Instant) -> Entry {
    Entry {
        id,
        facts,
        answer: Bytes::new(),
        stored_at: now,
        cost_micros: 0,
        threshold: Threshold::default(),
        weight: 0,
    }
}

fn facts(text: &str) -> Facts {
    Facts::of(text)
}

#[test]
fn only_the_same_partition_is_searched_and_the_threshold_decides() {
    let now = Instant::now();
    let mut ix = Index::new(policy(STATIC));
    let q = facts("How do I reset my password?");
    let id = ix
        .insert(1, at(0.0), q.clone(), Bytes::from_static(b"{}"), 7, now)
        .unwrap_or(0);
    // cos(0.3) = 0.955: a hit in its partition, nothing in another.
    assert_eq!(
        look(&ix, 1, &at(0.3), &q, now, 0.5),
        Lookup::Hit {
            id,
            similarity: cosine(&at(0.3), &at(0.0))
        }
    );
    assert!(matches!(
        look(&ix, 2, &at(0.0), &q, now, 0.5),
        Lookup::Miss { best: None, .. }
    ));
    // cos(0.6) = 0.825: below the threshold.
    assert!(matches!(
        look(&ix, 1, &at(0.6), &q, now, 0.5),
        Lookup::Miss {
            best: Some(_),
            refused: None
        }
    ));
    assert_eq!(ix.get(1, id).map(|e| e.cost_micros), Some(7));
}

#[test]
fn the_guards_pass_over_a_closer_entry_that_names_something_else() {
    let now = Instant::now();
    let mut ix = Index::new(policy(STATIC));
    let python = ix
        .insert(
            1,
            at(0.0),
            facts("How do I learn Python?"),
            Bytes::from_static(b"py"),
            1,
            now,
        )
        .unwrap_or(0);
    let java = ix
        .insert(
            1,
            at(0.35),
            facts("How do I learn Java?"),
            Bytes::from_static(b"java"),
            1,
            now,
        )
        .unwrap_or(0);
    // Closest to the Python question's vector, but asking about Java: served Java's answer,
    // and the refusal of the nearer one is said.
    let got = look(
        &ix,
        1,
        &at(0.05),
        &facts("What's the best way to learn Java?"),
        now,
        0.5,
    );
    match got {
        Lookup::Hit { id, .. } => assert_eq!(id, java),
        other => panic!("{other:?}"),
    }
    let got = look(&ix, 1, &at(0.0), &facts("How do I learn Rust?"), now, 0.5);
    assert_eq!(
        got,
        Lookup::Miss {
            refused: Some(Mismatch::Entity),
            best: None
        }
    );
    assert_ne!(python, java);
}

#[test]
fn entries_expire_and_the_oldest_leave_when_full() {
    let now = Instant::now();
    let mut p = policy(STATIC);
    p.max_bytes = 3 * (8 * 5 + ENTRY_OVERHEAD + 100);
    let mut ix = Index::new(p);
    let body = Bytes::from(vec![b'x'; 100]);
    let q = facts("q");
    let first = ix
        .insert(1, at(0.0), q.clone(), body.clone(), 0, now)
        .unwrap_or(0);
    for i in 1..3 {
        ix.insert(1, at(f64::from(i)), q.clone(), body.clone(), 0, now);
    }
    assert_eq!(ix.len(), 3);
    ix.insert(2, at(0.0), q.clone(), body.clone(), 0, now);
    assert_eq!(ix.len(), 3, "the oldest left");
    assert!(ix.get(1, first).is_none());
    assert!(ix.bytes() <= p.max_bytes);
    // Too heavy for the whole cache: not stored at all.
    assert_eq!(
        ix.insert(1, at(0.0), q.clone(), Bytes::from(vec![0; 4_000]), 0, now),
        None
    );
    // Past the time to live nothing is served, and the next insert sweeps them out.
    let later = now + Duration::from_secs(61);
    assert!(matches!(
        look(&ix, 2, &at(0.0), &q, later, 0.5),
        Lookup::Miss { .. }
    ));
    ix.insert(3, at(0.0), q.clone(), body, 0, later);
    assert_eq!(ix.len(), 1);
    ix.purge();
    assert!(ix.is_empty() && ix.bytes() == 0);
}

#[test]
fn the_verified_mode_verifies_until_an_entry_has_learnt_then_serves() {
    let now = Instant::now();
    let mut ix = Index::new(policy(Mode::Verified {
        delta: 0.05,
        floor: 0.5,
        budget: 1.0,
    }));
    let q = facts("How do I reset my password?");
    let id = ix
        .insert(1, at(0.0), q.clone(), Bytes::from_static(b"a"), 0, now)
        .unwrap_or(0);
    let close = at(0.1);
    let s = cosine(&close, &at(0.0));
    assert_eq!(
        look(&ix, 1, &close, &q, now, 0.99),
        Lookup::Verify {
            id,
            similarity: s,
            p: 1.0
        }
    );
    // Far below the floor: a plain miss.
    assert!(matches!(
        look(&ix, 1, &at(1.4), &q, now, 0.0),
        Lookup::Miss { .. }
    ));
    // Verification found it right close by, wrong further away (but twice right there).
    for k in 0..30 {
        let a = 0.01 * f64::from(k % 10);
        ix.observe(1, id, cosine(&at(a), &at(0.0)), true);
        ix.observe(1, id, cosine(&at(0.8 + a), &at(0.0)), k % 15 == 3);
    }
    let served = (0..100)
        .filter(|i| {
            matches!(
                look(&ix, 1, &at(0.02), &q, now, f64::from(*i) / 100.0),
                Lookup::Hit { .. }
            )
        })
        .count();
    assert!(served > 50, "served {served} of 100");
    let far = (0..100)
        .filter(|i| {
            matches!(
                look(&ix, 1, &at(0.7), &q, now, f64::from(*i) / 100.0),
                Lookup::Hit { .. }
            )
        })
        .count();
    assert!(far < served, "{far} vs {served}");
}

#[test]
fn the_static_mode_audits_its_share_of_would_be_hits() {
    let now = Instant::now();
    let audited = Mode::Static {
        threshold: 0.9,
        audit: 0.25,
    };
    let mut ix = Index::new(policy(audited));
    let q = facts("How do I reset my password?");
    let id = ix
        .insert(1, at(0.0), q.clone(), Bytes::from_static(b"a"), 0, now)
        .unwrap_or(0);
    let close = at(0.1);
    let s = cosine(&close, &at(0.0));
    assert_eq!(
        look(&ix, 1, &close, &q, now, 0.2),
        Lookup::Verify {
            id,
            similarity: s,
            p: 0.25
        }
    );
    assert_eq!(
        look(&ix, 1, &close, &q, now, 0.3),
        Lookup::Hit { id, similarity: s }
    );
    // Below the threshold nothing is audited: a miss is a miss.
    assert!(matches!(
        look(&ix, 1, &at(0.6), &q, now, 0.0),
        Lookup::Miss { .. }
    ));
}

#[test]
fn a_route_may_have_its_own_mode_or_none_and_would_be_hits_feed_its_estimate() {
    let strict = Mode::Static {
        threshold: 0.99,
        audit: 0.0,
    };
    let cache = SemanticCache::new(policy(STATIC), 1.0)
        .with_route("strict", Some(strict))
        .with_route("exempt", None);
    assert_eq!(cache.mode("chat"), Some(STATIC));
    assert_eq!(cache.mode("strict"), Some(strict));
    assert_eq!(cache.mode("exempt"), None);
    let now = Instant::now();
    let req = sluice_core::ChatRequest::from_bytes(Bytes::from_static(
        br#"{"model":"chat","messages":[{"role":"user","content":"How do I reset my password?"}]}"#,
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    let q = Question::of(None, "chat", &req, cache.limits())
        .unwrap_or_else(|w| panic!("{}", w.label()));
    cache.insert(&q, at(0.0), Bytes::from_static(b"a"), 0, now);
    let close = at(0.1); // similarity 0.995
    let route: std::sync::Arc<str> = "chat".into();
    assert!(matches!(
        cache.lookup(&q, "chat", STATIC, &close, now, 0.5),
        Lookup::Hit { .. }
    ));
    assert!(matches!(
        cache.lookup(
            &q,
            "chat",
            Mode::Static {
                threshold: 0.999,
                audit: 0.0
            },
            &close,
            now,
            0.5
        ),
        Lookup::Miss { .. }
    ));
    assert!(cache.estimates().is_empty(), "nothing verified yet");
    cache.verified(&route, (q.partition, 1), 0.995, false, 0.5);
    let e = cache.estimates();
    assert_eq!(e.len(), 1);
    // One would-be hit; one wrong verification at p = 0.5 stands for two: capped at 1.
    assert_eq!((&*e[0].0, e[0].1), ("chat", 1.0));
}

#[test]
fn verifications_spend_at_most_the_routes_budget_of_would_be_hits() {
    let now = Instant::now();
    let mode = Mode::Verified {
        delta: 0.02,
        floor: 0.5,
        budget: 0.1,
    };
    let cache = SemanticCache::new(policy(mode), 1.0);
    let (mut verified, mut unverified) = (0, 0);
    for i in 0..1000 {
        // Each question in its own partition: every entry is new, so every would-be hit
        // asks to be verified.
        let q = Question {
            partition: i,
            text: "How do I reset my password?".into(),
            facts: facts("How do I reset my password?"),
        };
        cache.insert(&q, at(0.0), Bytes::from_static(b"a"), 0, now);
        match cache.lookup(&q, "chat", mode, &at(0.1), now, 0.5) {
            Lookup::Verify { .. } => verified += 1,
            Lookup::Unverified { .. } => unverified += 1,
            other => panic!("{other:?}"),
        }
    }
    // The burst, then a tenth of the would-be hits.
    let most = crate::semantic::cache::VERIFY_BURST as usize + 100;
    assert!(verified <= most && verified >= most - 2, "{verified}");
    assert_eq!(verified + unverified, 1000);
}

#[test]
fn a_route_that_cannot_certify_stops_verifying_but_for_a_trickle() {
    use crate::semantic::cache::STOP_UNSERVED;
    let now = Instant::now();
    let mode = Mode::Verified {
        delta: 0.02,
        floor: 0.5,
        budget: 1.0,
    };
    let cache = SemanticCache::new(policy(mode), 1.0);
    let route: std::sync::Arc<str> = std::sync::Arc::from("chat");
    // Each question its own partition: a fresh entry, with no evidence of its own.
    let ask = |i: u64, u: f64| {
        let q = Question {
            partition: i,
            text: "How do I reset my password?".into(),
            facts: facts("How do I reset my password?"),
        };
        cache.insert(&q, at(0.0), Bytes::from_static(b"a"), 0, now);
        cache.lookup(&q, "chat", mode, &at(0.1), now, u)
    };
    assert!(matches!(ask(0, 0.5), Lookup::Verify { p, .. } if p == 1.0));
    // Verified answers right 13 times in 14 however similar (0.90 to 0.99, the most similar
    // wrong too): no region can show 98%.
    for k in 0..120_u32 {
        let s = 0.9 + 0.01 * f64::from(k % 10);
        cache.verified(&route, (0, 1), s, k % 14 != 9, 1.0);
    }
    // Nothing served yet, but its entries may still learn: it verifies on, until it has
    // gone STOP_UNSERVED would-be hits without serving one.
    assert_eq!(cache.stopped(), vec![(route.clone(), false)]);
    for i in 0..STOP_UNSERVED - 1 {
        assert!(matches!(ask(10_000 + i, 0.5), Lookup::Verify { .. }));
    }
    assert_eq!(cache.stopped(), vec![(route.clone(), true)]);
    let (mut verified, mut missed) = (0, 0);
    for i in 0..1000_u32 {
        match ask(u64::from(i) + 1, f64::from(i) / 1000.0) {
            Lookup::Verify { p, .. } => {
                assert_eq!(p, 1.0, "each stands for itself in the estimate");
                verified += 1;
            }
            Lookup::Miss { best, .. } => {
                assert!(best.is_some());
                missed += 1;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(verified, 10, "one would-be hit in a hundred");
    assert_eq!(missed, 990);
    // A static route is never stopped, nor listed.
    let fixed = SemanticCache::new(policy(STATIC), 1.0);
    assert!(fixed.stopped().is_empty());
}

/// Entries of this process whose "other instances" are the test: it hands the cache the
/// verdicts put in `inbox`.
#[derive(Debug)]
struct Told {
    index: parking_lot::Mutex<Index>,
    inbox: std::sync::Arc<parking_lot::Mutex<Vec<Verdict>>>,
}

impl SemanticEntries for Told {
    fn policy(&self) -> Policy {
        self.index.policy()
    }
    fn set_max_bytes(&self, max_bytes: usize) {
        self.index.set_max_bytes(max_bytes);
    }
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
        SemanticEntries::lookup(&self.index, partition, v, facts, now, u, mode, pooled)
    }
    fn answer(&self, partition: u64, id: u64) -> Option<std::sync::Arc<crate::Stored>> {
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
        SemanticEntries::insert(&self.index, partition, v, facts, answer, cost_micros, now)
    }
    fn observe(&self, partition: u64, id: u64, route: Option<&str>, s: f64, right: bool) {
        SemanticEntries::observe(&self.index, partition, id, route, s, right);
    }
    fn learnt_elsewhere(&self) -> Vec<Verdict> {
        std::mem::take(&mut *self.inbox.lock())
    }
    fn size(&self) -> (u64, u64) {
        SemanticEntries::size(&self.index)
    }
    fn purge(&self) -> u64 {
        SemanticEntries::purge(&self.index)
    }
}

#[test]
fn other_instances_verifications_teach_the_routes_pooled_curve() {
    let now = Instant::now();
    let mode = Mode::Verified {
        delta: 0.02,
        floor: 0.5,
        budget: 0.25,
    };
    let inbox = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
    let told = Told {
        index: parking_lot::Mutex::new(Index::new(policy(mode))),
        inbox: inbox.clone(),
    };
    let cache = SemanticCache::with_entries(Box::new(told), 1.0);
    let q = |partition| Question {
        partition,
        text: "How do I reset my password?".into(),
        facts: facts("How do I reset my password?"),
    };
    let close = at(0.1); // similarity 0.995
    // Knowing nothing, a would-be hit on a new entry is verified.
    cache.insert(&q(1), at(0.0), Bytes::from_static(b"a"), 0, now);
    assert!(matches!(
        cache.lookup(&q(1), "chat", mode, &close, now, 0.5),
        Lookup::Verify { .. }
    ));
    // Other instances verified 2,000 of this route's would-be hits over [0.6, 1), right
    // with probability sigmoid(40 (s - 0.85)); another route's verdicts teach this one
    // nothing.
    use rand::{RngExt, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    for route in ["chat", "other"] {
        for _ in 0..2000 {
            let similarity = 0.6 + 0.4 * rng.random::<f64>();
            let p = 1.0 / (1.0 + (-40.0 * (similarity - 0.85)).exp());
            inbox.lock().push(Verdict {
                route: route.into(),
                similarity,
                right: rng.random::<f64>() < p,
            });
        }
    }
    cache.insert(&q(2), at(0.0), Bytes::from_static(b"a"), 0, now);
    assert!(matches!(
        cache.lookup(&q(2), "chat", mode, &close, now, 0.5),
        Lookup::Hit { .. }
    ));
    assert!(inbox.lock().is_empty(), "read once");
    cache.insert(&q(3), at(0.0), Bytes::from_static(b"a"), 0, now);
    assert!(matches!(
        cache.lookup(&q(3), "third", mode, &close, now, 0.5),
        Lookup::Verify { .. }
    ));
}
