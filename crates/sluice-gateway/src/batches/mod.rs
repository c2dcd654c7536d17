//! Batch jobs, as the gateway serves and runs them: OpenAI's Files and Batch APIs
//! ([`api`]), and the runner that sends each item through the whole walk in the batch lane
//! as the job's tenant and key and ends it, with its bill, once ([`runner`]). A job of
//! documents (`/v1/analyses`) runs each item through [`Documents`], which document analysis
//! plugs in, in slots of its own. What a job is and how its items are kept is
//! `sluice-batch`'s.

pub mod api;
mod files;
mod item;
pub mod runner;
mod withdrawals;

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use sluice_batch::{Claimed, Jobs, Kind, StoredBatch};
use tokio::sync::Notify;

pub(crate) use item::Outcome;

use crate::Gateway;
use crate::walk::Walker;
use crate::walk::auth::Identity;

/// Runs the items of document jobs, which are not one call each but an analysis of many:
/// the runner claims them in [`Documents::slots`] slots of their own and hands each here.
pub(crate) trait Documents: Send + Sync + std::fmt::Debug {
    /// Documents analysed at once on this gateway.
    fn slots(&self) -> usize;
    /// Analyses claimed item `item` of job `job` as `caller`. Its reviews' ledger rows are
    /// durable when it ends (so [`Outcome::Ended`] carries none).
    fn run(
        self: Arc<Self>,
        walker: Walker,
        job: StoredBatch,
        item: Claimed,
        caller: Identity,
    ) -> BoxFuture<'static, Outcome>;
}

/// What the batch API's handlers are served with: the gateway (whose keys say who asks), its
/// batch jobs when served, and whether documents are analysed.
#[derive(Clone, Debug)]
pub struct Served {
    /// The gateway.
    pub gw: Arc<Gateway>,
    /// Its batch jobs, when served.
    pub batches: Option<Arc<Batches>>,
    /// Whether `/v1/analyses` is served (a job of documents needs it).
    pub analyses: bool,
}

/// How batch jobs run on this gateway.
#[derive(Clone, Debug)]
pub struct BatchSettings {
    /// The lane items wait in (an index into the gateway's lanes; set when the gateway is
    /// built, from the lane's name).
    pub lane: usize,
    /// Items sent at once, at most.
    pub concurrency: u32,
    /// How long a claim holds before another gateway may take the item.
    pub lease: Duration,
    /// How long files and ended jobs are kept.
    pub keep: Duration,
    /// The largest input file, in bytes.
    pub max_file_bytes: u64,
    /// Items queued in all jobs at most.
    pub max_queued_items: u64,
    /// How often the runner looks for work when it found none (a submission on this
    /// gateway wakes it at once).
    pub poll: Duration,
}

impl Default for BatchSettings {
    fn default() -> Self {
        Self {
            lane: 0,
            concurrency: 64,
            lease: Duration::from_secs(60),
            keep: Duration::from_secs(30 * 86_400),
            max_file_bytes: 100 * 1024 * 1024,
            max_queued_items: 200_000,
            poll: Duration::from_millis(500),
        }
    }
}

/// The gateway's batch jobs: where they are kept, how they run, and who runs them here.
#[derive(Debug)]
pub struct Batches {
    pub(crate) jobs: Jobs,
    pub(crate) settings: BatchSettings,
    /// This gateway's name as an owner of claims (unique per process).
    pub(crate) owner: String,
    /// Wake the runner's claims (of calls, of documents) when a job is submitted here.
    submitted: [Notify; 2],
    /// Who runs document jobs' items, when documents are analysed here.
    pub(crate) documents: OnceLock<Arc<dyn Documents>>,
    /// What withdraws the unsent items of a job cancelled.
    pub(crate) withdrawals: withdrawals::Withdrawals,
}

impl Batches {
    /// Batch jobs kept in `jobs`, run as `settings` says.
    pub fn new(jobs: Jobs, settings: BatchSettings) -> Arc<Self> {
        Arc::new(Self {
            jobs,
            settings,
            owner: format!("sluice-{}", uuid::Uuid::new_v4().simple()),
            submitted: [Notify::new(), Notify::new()],
            documents: OnceLock::new(),
            withdrawals: withdrawals::Withdrawals::default(),
        })
    }

    /// The job store.
    pub fn jobs(&self) -> &Jobs {
        &self.jobs
    }

    /// What wakes the claims of `kind`'s items.
    pub(crate) fn submitted(&self, kind: Kind) -> &Notify {
        &self.submitted[usize::from(kind == Kind::Documents)]
    }
}

/// Now, in Unix milliseconds (what jobs and items are stamped with).
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Milliseconds of `d`.
pub(crate) fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
