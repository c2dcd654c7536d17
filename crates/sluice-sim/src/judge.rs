//! The simulated judge: the client application's own check of an answer, as a coin weighted
//! by the answering model's quality for the task. Each verdict is a pure function of the
//! seed and the request id (no shared random stream), so two policies replaying the same
//! traffic get the same coin for the same request and model; the verdicts are kept so a
//! test can count good answers and the bill per request.

use std::collections::{BTreeMap, HashMap};

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use sluice_routing::ticket_hash;

use crate::spec::UpstreamSpec;

/// One answer judged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The request's index in its workload.
    pub index: usize,
    /// Its task.
    pub task: String,
    /// The upstream that answered.
    pub upstream: String,
    /// Judged good.
    pub good: bool,
}

/// Scores answers by the answering upstream's quality for the task.
#[derive(Debug, Default)]
pub struct Judge {
    seed: u64,
    /// The upstream behind each deployment name (`x-sluice-upstream`).
    deployments: HashMap<String, String>,
    quality: Mutex<HashMap<String, BTreeMap<String, f64>>>,
    verdicts: Mutex<Vec<Verdict>>,
}

impl PartialEq for Judge {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Judge {
    /// A judge of `upstreams`' answers by their quality tables, its coins seeded by `seed`;
    /// `deployments` names the upstream behind each deployment name.
    pub fn new(
        upstreams: &[(String, UpstreamSpec)],
        deployments: HashMap<String, String>,
        seed: u64,
    ) -> Self {
        Self {
            seed,
            deployments,
            quality: Mutex::new(
                upstreams
                    .iter()
                    .map(|(n, s)| (n.clone(), s.quality.clone()))
                    .collect(),
            ),
            verdicts: Mutex::new(Vec::new()),
        }
    }

    /// Changes `upstream`'s quality for `task` from now on (a model that got worse).
    pub fn set_quality(&self, upstream: &str, task: &str, q: f64) {
        self.quality
            .lock()
            .entry(upstream.to_string())
            .or_default()
            .insert(task.to_string(), q);
    }

    /// The probability that `upstream`'s answer for `task` is good (1 for an upstream with
    /// no quality table; `"*"` for a task it does not list); `None` for an upstream it does
    /// not know.
    pub fn quality(&self, upstream: &str, task: &str) -> Option<f64> {
        let q = self.quality.lock();
        let table = q.get(upstream)?;
        Some(
            table
                .get(task)
                .or_else(|| table.get("*"))
                .copied()
                .unwrap_or(1.0),
        )
    }

    /// Judges request `index` (id `request_id`) of `task`, answered by deployment
    /// `deployment`; `None` (and no verdict kept) when no known upstream is behind it.
    pub fn judge(
        &self,
        index: usize,
        request_id: &str,
        task: &str,
        deployment: &str,
    ) -> Option<bool> {
        let upstream = self
            .deployments
            .get(deployment)
            .map_or(deployment, String::as_str);
        let q = self.quality(upstream, task)?;
        // The id's hash seeds a generator rather than being the coin: sequential ids hash
        // with structure (FNV), and ChaCha's first draw from distinct seeds has none.
        let mut rng = StdRng::seed_from_u64(ticket_hash(self.seed, 11, request_id));
        let coin: f64 = rng.random();
        let good = coin < q;
        self.verdicts.lock().push(Verdict {
            index,
            task: task.to_string(),
            upstream: upstream.to_string(),
            good,
        });
        Some(good)
    }

    /// Every verdict so far, in the order given.
    pub fn verdicts(&self) -> Vec<Verdict> {
        self.verdicts.lock().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_follow_quality_and_repeat_for_the_same_request() {
        let mut good = UpstreamSpec::default();
        good.quality.insert("qa".into(), 0.9);
        good.quality.insert("*".into(), 0.2);
        let names = HashMap::from([("m/model".to_string(), "m".to_string())]);
        let j = Judge::new(&[("m".into(), good)], names, 7);
        let n = 4_000;
        let share = |task: &str| {
            (0..n)
                .filter(|i| j.judge(*i, &format!("r-{i}"), task, "m/model") == Some(true))
                .count() as f64
                / n as f64
        };
        assert!((share("qa") - 0.9).abs() < 0.02);
        assert!((share("poetry") - 0.2).abs() < 0.02);
        assert_eq!(j.judge(0, "r-0", "qa", "elsewhere"), None, "not judged");
        assert_eq!(
            j.judge(0, "r-x", "qa", "m"),
            j.judge(1, "r-x", "qa", "m/model")
        );
        j.set_quality("m", "qa", 0.0);
        assert_eq!(j.judge(2, "r-1", "qa", "m"), Some(false));
        assert_eq!(j.verdicts().len(), 2 * n + 3);
    }
}
