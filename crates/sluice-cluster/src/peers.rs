//! Peers agree on the shared sections of the configuration: each instance publishes a hash
//! of them, and one whose hash differs from a live peer's is named, loudly, in the log and
//! `/readyz`. Limits and budgets enforced with different numbers would be no limits at all.
//! The same publication is each instance's heartbeat: one silent for three of them is taken
//! as dead, and its holds are settled by the others.

use std::time::SystemTime;

use crate::health::Health;
use crate::store::Redis;

/// A peer that has not published for this long is gone.
const LIVE_MS: u64 = 60_000;

fn now_ms() -> u64 {
    crate::wall::ms(SystemTime::now())
}

/// Which live peers' hashes differ from `ours`, from `(instance, "hash ms")` pairs, at `now`.
pub fn disagreeing(me: &str, ours: &str, peers: &[(String, String)], now: u64) -> Vec<String> {
    peers
        .iter()
        .filter(|(id, _)| id != me)
        .filter_map(|(id, v)| {
            let (hash, at) = v.split_once(' ')?;
            let at: u64 = at.parse().ok()?;
            (now.saturating_sub(at) < LIVE_MS && hash != ours)
                .then(|| format!("instance {id} runs configuration {hash}"))
        })
        .collect()
}

/// Peers that published once and then went silent for longer than `silent_ms` (taken as
/// dead: their holds are settled), from `(instance, "hash ms")` pairs, at `now`.
pub fn silent(me: &str, peers: &[(String, String)], now: u64, silent_ms: u64) -> Vec<String> {
    peers
        .iter()
        .filter(|(id, _)| id != me)
        .filter(|(_, v)| {
            v.split_once(' ')
                .and_then(|(_, at)| at.parse::<u64>().ok())
                .is_some_and(|at| now.saturating_sub(at) > silent_ms)
        })
        .map(|(id, _)| id.clone())
        .collect()
}

/// Publishes `hash` as `me`'s (its heartbeat) and compares the live peers'; returns the
/// peers silent for longer than `silent_ms` (none when Redis did not answer).
pub(crate) async fn publish_and_compare(
    redis: &Redis,
    health: &Health,
    (me, hash): (&str, &str),
    silent_ms: u64,
) -> Vec<String> {
    let key = redis.key("instances");
    let now = now_ms();
    let set = redis
        .query::<()>(
            redis::cmd("HSET")
                .arg(&key)
                .arg(me)
                .arg(format!("{hash} {now}")),
        )
        .await;
    let all: Result<Vec<(String, String)>, _> = redis.query(redis::cmd("HGETALL").arg(&key)).await;
    let (Ok(()), Ok(all)) = (set, all) else {
        return Vec::new();
    };
    let differ = disagreeing(me, hash, &all, now);
    let said = (!differ.is_empty()).then(|| {
        format!(
            "this instance runs configuration {hash}, but {}: their [tenants], [keys], \
             [prices], [providers], [models], [billing] or [cluster] differ",
            differ.join(", ")
        )
    });
    {
        let mut was = health.disagreement.lock();
        if said != *was {
            if let Some(s) = &said {
                tracing::error!("peers disagree: {s}");
            }
            *was = said;
        }
    }
    // Peers gone for long are forgotten.
    let gone: Vec<&String> = all
        .iter()
        .filter(|(_, v)| {
            v.split_once(' ')
                .and_then(|(_, at)| at.parse::<u64>().ok())
                .is_none_or(|at| now.saturating_sub(at) > 10 * LIVE_MS)
        })
        .map(|(id, _)| id)
        .collect();
    if !gone.is_empty() {
        let _ = redis
            .query::<()>(redis::cmd("HDEL").arg(&key).arg(gone))
            .await;
    }
    silent(me, &all, now, silent_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_that_published_and_went_silent_are_dead() {
        let peers = vec![
            ("me".to_string(), "aaa 0".to_string()),
            ("quiet".to_string(), "aaa 10000".to_string()),
            ("beating".to_string(), "aaa 20000".to_string()),
            ("garbled".to_string(), "aaa".to_string()),
        ];
        assert_eq!(
            silent("me", &peers, 25_001, 15_000),
            vec!["quiet".to_string()]
        );
    }

    #[test]
    fn only_live_peers_with_another_hash_disagree() {
        let peers = vec![
            ("me".to_string(), "aaa 1000".to_string()),
            ("b".to_string(), "aaa 1000".to_string()),
            ("c".to_string(), "bbb 1000".to_string()),
            ("d".to_string(), "bbb 0".to_string()),
            ("e".to_string(), "garbled".to_string()),
        ];
        let said = disagreeing("me", "aaa", &peers, 61_000 - 1);
        assert_eq!(said, vec!["instance c runs configuration bbb"]);
    }
}
