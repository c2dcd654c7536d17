//! Batch jobs, as the gateway serves and runs them: OpenAI's Files and Batch APIs
//! ([`api`]), and the runner that sends each item through the whole walk in the batch lane
//! as the job's tenant and key and ends it, with its bill, once ([`runner`]). What a job is
//! and how its items are kept is `sluice-batch`'s.

pub mod api;
mod files;
mod item;
pub mod runner;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sluice_batch::Jobs;
use tokio::sync::Notify;

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
    /// Wakes the runner when a job is submitted here.
    pub(crate) submitted: Notify,
}

impl Batches {
    /// Batch jobs kept in `jobs`, run as `settings` says.
    pub fn new(jobs: Jobs, settings: BatchSettings) -> Arc<Self> {
        Arc::new(Self {
            jobs,
            settings,
            owner: format!("sluice-{}", uuid::Uuid::new_v4().simple()),
            submitted: Notify::new(),
        })
    }

    /// The job store.
    pub fn jobs(&self) -> &Jobs {
        &self.jobs
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
