//! What one instance tells the others of its routers' learning, and the trait that carries
//! it ([`RouterLog`]): a score or an answer's usage learnt, an answer routed (so feedback
//! reaches it through any instance), a request seen (so a retry sent to another instance is
//! still told). One process has no one to tell; instances of a cluster append to one log and
//! apply the others' records (`sluice-cluster`), so their beliefs agree without a round trip
//! on a request's path. Scores only ever come from the log after the instance that learnt
//! them applied them, so nothing is counted twice.

/// One record of routers' learning.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum Told {
    /// A candidate's answer for a task scored `score` (replacing `replaces`).
    Score {
        /// The router.
        router: String,
        /// The task.
        task: String,
        /// The candidate group.
        candidate: String,
        /// The score (0 to 1).
        score: f64,
        /// The score it replaces, when the answer was scored before.
        replaces: Option<f64>,
    },
    /// A candidate's answer's output length and cached share.
    Usage {
        /// The router.
        router: String,
        /// The task.
        task: String,
        /// The candidate group.
        candidate: String,
        /// Output tokens.
        output: u64,
        /// The share of the prompt served from the provider's cache.
        cached: f64,
    },
    /// An answer routed, remembered for feedback.
    Routed {
        /// The request's id.
        id: String,
        /// Its tenant.
        tenant: Option<String>,
        /// The router.
        router: String,
        /// The task.
        task: String,
        /// The candidate chosen, by index.
        candidate: usize,
        /// A score already given, with its signal's label.
        scored: Option<(f64, String)>,
    },
    /// A request seen (to tell a retry of it).
    Sent {
        /// Its tenant.
        tenant: Option<String>,
        /// The hash of its body.
        hash: u64,
        /// The request's id.
        id: String,
    },
}

/// Where an instance tells the others what its routers learnt; what the others tell reaches
/// it through the function it was made with.
pub trait RouterLog: Send + Sync + std::fmt::Debug {
    /// Tells every other instance `told`.
    fn tell(&self, told: &Told);
}

/// The behaviour every [`RouterLog`] keeps: a record told by one instance reaches another
/// whole and once, and is not handed back to the instance that told it. `heard_by_a` and
/// `heard_by_b` read what each instance's apply function was given so far.
#[cfg(any(test, feature = "conformance"))]
#[allow(clippy::panic, clippy::expect_used, clippy::unwrap_used)]
pub mod conformance {
    use std::time::Duration;

    use super::{RouterLog, Told};

    /// How long a record may take to reach another instance.
    pub const LANDS_WITHIN: Duration = Duration::from_secs(5);

    /// Waits until `b` hears what `a` tells (an instance hears records told after it began
    /// to follow), telling probes; what `b` heard by then.
    async fn following(a: &dyn RouterLog, heard_by_b: &impl Fn() -> Vec<Told>) -> usize {
        let probe = Told::Sent {
            tenant: None,
            hash: 0,
            id: "probe".into(),
        };
        let deadline = tokio::time::Instant::now() + LANDS_WITHIN;
        while heard_by_b().is_empty() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the other instance never began to follow"
            );
            a.tell(&probe);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        heard_by_b().len()
    }

    /// Runs the check with `a` telling.
    pub async fn run(
        a: &dyn RouterLog,
        heard_by_a: impl Fn() -> Vec<Told>,
        heard_by_b: impl Fn() -> Vec<Told>,
    ) {
        let records = [
            Told::Score {
                router: "auto".into(),
                task: "summarise".into(),
                candidate: "small".into(),
                score: 0.75,
                replaces: Some(0.25),
            },
            Told::Routed {
                id: "r-1".into(),
                tenant: Some("acme".into()),
                router: "auto".into(),
                task: "summarise".into(),
                candidate: 1,
                scored: Some((0.0, "retried".into())),
            },
            Told::Sent {
                tenant: None,
                hash: u64::MAX,
                id: "r-2".into(),
            },
        ];
        let before = following(a, &heard_by_b).await;
        let since = || heard_by_b().split_off(before);
        for r in &records {
            a.tell(r);
        }
        let deadline = tokio::time::Instant::now() + LANDS_WITHIN;
        while since().len() < records.len() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the other instance heard {:?}",
                since()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(since(), records, "heard whole, in order, once");
        assert!(heard_by_a().is_empty(), "an instance does not hear itself");
    }
}
