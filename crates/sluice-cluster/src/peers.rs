//! Peers agree on the shared sections of the configuration: each instance publishes a hash
//! of them, and one whose hash differs from a live peer's is named, loudly, in the log and
//! `/readyz`. Limits and budgets enforced with different numbers would be no limits at all.

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

/// Publishes `hash` as `me`'s and compares the live peers'.
pub(crate) async fn publish_and_compare(redis: &Redis, health: &Health, me: &str, hash: &str) {
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
        return;
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
