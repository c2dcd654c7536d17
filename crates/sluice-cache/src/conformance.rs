//! The behaviour every [`AnswerStore`] and every [`SemanticEntries`] keeps, whatever holds
//! them: one suite per kind, run against the in-process implementation here and against the
//! Redis one in `sluice-cluster`'s tests (with the `conformance` feature). A store may write
//! in the background: the checks wait for a write to be seen, up to [`LANDS_WITHIN`].
//! `make(ttl)` gives a fresh, empty answer store keeping answers `ttl`; `a` and `b` are two
//! instances' semantic entries on one store (the same object in one process).

// Test support: a check that fails panics, as a test's assertion does.
#![allow(clippy::panic, clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use crate::semantic::{Facts, Lookup, Mode, SemanticEntries, Threshold};
use crate::store::AnswerStore;
use crate::{Key, Stored};

/// How long a write may take to be seen.
pub const LANDS_WITHIN: Duration = Duration::from_secs(5);

/// Runs every check on stores `make` gives.
pub async fn run<S: AnswerStore + ?Sized>(make: impl Fn(Duration) -> Arc<S>) {
    an_answer_kept_comes_back_as_it_was(&*make(Duration::from_secs(60))).await;
    a_removed_answer_is_gone(&*make(Duration::from_secs(60))).await;
    a_purge_forgets_every_answer(&*make(Duration::from_secs(60))).await;
    concurrent_writes_of_one_key_leave_one_whole_answer(&*make(Duration::from_secs(60))).await;
    an_answer_is_forgotten_after_its_time(&*make(Duration::from_millis(300))).await;
}

fn key(n: u8) -> Key {
    let mut k = [7u8; 32];
    k[0] = n;
    k
}

fn answer(body: &'static str, cost: u64) -> Arc<Stored> {
    Arc::new(Stored {
        body: Bytes::from_static(body.as_bytes()),
        cost_micros: cost,
        stored_at: Instant::now(),
    })
}

/// Waits until `check` holds of what `store` keeps under `k`.
async fn until<S: AnswerStore + ?Sized>(
    store: &S,
    k: &Key,
    what: &str,
    check: impl Fn(Option<&Stored>) -> bool,
) {
    let deadline = tokio::time::Instant::now() + LANDS_WITHIN;
    loop {
        let got = store.get(k).await;
        if check(got.as_deref()) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never {what}: {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn an_answer_kept_comes_back_as_it_was<S: AnswerStore + ?Sized>(store: &S) {
    assert!(store.get(&key(1)).await.is_none(), "a fresh store is empty");
    store.put(key(1), answer("{\"id\":\"one\"}", 1_234));
    until(store, &key(1), "kept", |a| {
        a.is_some_and(|a| a.body == "{\"id\":\"one\"}" && a.cost_micros == 1_234)
    })
    .await;
    assert!(
        store.get(&key(2)).await.is_none(),
        "another key holds nothing"
    );
    let (entries, bytes) = store.size();
    assert_eq!(entries, 1);
    assert!(bytes >= 12, "an entry weighs at least its body: {bytes}");
}

async fn a_removed_answer_is_gone<S: AnswerStore + ?Sized>(store: &S) {
    store.put(key(3), answer("{\"id\":\"three\"}", 1));
    until(store, &key(3), "kept", |a| a.is_some()).await;
    store.remove(&key(3));
    until(store, &key(3), "removed", |a| a.is_none()).await;
}

async fn a_purge_forgets_every_answer<S: AnswerStore + ?Sized>(store: &S) {
    for n in 10..15 {
        store.put(key(n), answer("{}", 1));
    }
    until(store, &key(14), "kept", |a| a.is_some()).await;
    store.purge();
    for n in 10..15 {
        until(store, &key(n), "purged", |a| a.is_none()).await;
    }
    assert_eq!(store.size().0, 0);
}

async fn concurrent_writes_of_one_key_leave_one_whole_answer<S: AnswerStore + ?Sized>(store: &S) {
    let bodies = ["{\"n\":1}", "{\"n\":2}", "{\"n\":3}", "{\"n\":4}"];
    for b in bodies {
        store.put(key(20), answer(b, 5));
    }
    until(store, &key(20), "kept", |a| {
        a.is_some_and(|a| bodies.iter().any(|b| a.body == *b) && a.cost_micros == 5)
    })
    .await;
}

async fn an_answer_is_forgotten_after_its_time<S: AnswerStore + ?Sized>(store: &S) {
    store.put(key(30), answer("{}", 1));
    until(store, &key(30), "kept", |a| a.is_some()).await;
    until(store, &key(30), "forgotten after its time", |a| a.is_none()).await;
}

/// The static mode the semantic check matches under.
pub const SEMANTIC_MODE: Mode = Mode::Static {
    threshold: 0.9,
    audit: 0.0,
};

/// A unit vector of 8 dimensions along axis `i`, leaning `lean` towards the next one.
fn vector(i: usize, lean: f32) -> Vec<f32> {
    let mut v = [0.0f32; 8];
    v[i % 8] = 1.0;
    v[(i + 1) % 8] = lean;
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / norm).collect()
}

/// Runs every semantic check; both instances keep entries for `ttl` under
/// [`SEMANTIC_MODE`], and `partition` keeps this run apart from others on one store.
pub async fn semantic(a: &dyn SemanticEntries, b: &dyn SemanticEntries, partition: u64) {
    let ttl = a.policy().ttl;
    let now = Instant::now();
    let question = "What is the capital of France?";
    let facts = Facts::of(question);
    let pooled = Threshold::default();
    let look = |e: &dyn SemanticEntries, p: u64, v: &[f32], at: Instant| {
        e.lookup(p, v, &facts, at, 0.5, SEMANTIC_MODE, &pooled)
    };
    assert!(
        matches!(
            look(a, partition, &vector(0, 0.0), now),
            Lookup::Miss { .. }
        ),
        "nothing kept yet"
    );
    let Some(id) = a.insert(
        partition,
        vector(0, 0.0),
        facts.clone(),
        Bytes::from_static(b"{\"answer\":\"Paris\"}"),
        700,
        now,
    ) else {
        panic!("an entry under its size bound was not kept");
    };
    let near = vector(0, 0.1);
    assert!(
        matches!(look(a, partition, &near, now), Lookup::Hit { id: hit, similarity } if hit == id && similarity > 0.99),
        "a question that means the same is a hit"
    );
    let kept = a
        .answer(partition, id)
        .map(|s| (s.body.clone(), s.cost_micros));
    assert_eq!(
        kept,
        Some((Bytes::from_static(b"{\"answer\":\"Paris\"}"), 700))
    );
    assert!(
        matches!(
            look(a, partition, &vector(3, 0.0), now),
            Lookup::Miss { .. }
        ),
        "a question that means something else is a miss"
    );
    assert!(
        matches!(look(a, partition + 1, &near, now), Lookup::Miss { .. }),
        "another partition holds nothing"
    );
    assert!(
        matches!(
            look(a, partition, &near, now + ttl + Duration::from_secs(1)),
            Lookup::Miss { .. }
        ),
        "an entry is not served after its time"
    );
    assert!(a.size().0 >= 1 && a.size().1 > 0);
    let deadline = Instant::now() + LANDS_WITHIN;
    while !matches!(look(b, partition, &near, Instant::now()), Lookup::Hit { id: hit, .. } if hit == id)
    {
        assert!(
            Instant::now() < deadline,
            "the other instance never served the entry under its id"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        b.answer(partition, id).map(|s| s.body.clone()),
        Some(Bytes::from_static(b"{\"answer\":\"Paris\"}"))
    );
    assert!(a.purge() >= 1);
    assert!(
        matches!(
            look(a, partition, &near, Instant::now()),
            Lookup::Miss { .. }
        ),
        "a purge forgets every entry"
    );
}

#[cfg(test)]
mod tests {
    use crate::LocalAnswers;

    /// The in-process store keeps the behaviour every store keeps.
    #[tokio::test]
    async fn the_local_store_conforms() {
        super::run(|ttl| std::sync::Arc::new(LocalAnswers::new(ttl, 1 << 20))).await;
    }

    /// The in-process semantic index keeps the behaviour every store of entries keeps.
    #[tokio::test]
    async fn the_local_semantic_index_conforms() {
        use crate::semantic::{Index, Policy};
        let local = parking_lot::Mutex::new(Index::new(Policy {
            mode: super::SEMANTIC_MODE,
            ttl: std::time::Duration::from_secs(60),
            max_bytes: 1 << 20,
        }));
        super::semantic(&local, &local, 1).await;
    }
}
