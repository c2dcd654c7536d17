//! `[batches]`: batch jobs (OpenAI's Files and Batch APIs), run by the gateway itself in a
//! lane of its own, kept in the ledger's store.

use std::time::Duration;

use serde::Deserialize;

use crate::diagnostic::Diagnostic;
use crate::document::{Document, Seg};

/// `[batches]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
#[serde(default)]
pub struct BatchesConfig {
    /// Whether `/v1/files` and `/v1/batches` are served and jobs run (they need the
    /// ledger's store).
    pub enabled: bool,
    /// The lane items wait in (default `batch`, else the last lane).
    pub lane: Option<String>,
    /// Items this gateway sends at once, at most: they wait in the lane's queue for what
    /// interactive traffic leaves.
    pub concurrency: u32,
    /// How long a claimed item is this gateway's before another may take it (renewed while
    /// it runs): how soon items of a gateway that died are sent again by another.
    #[serde(with = "humantime_serde")]
    pub lease: Duration,
    /// How long files and ended jobs (with their outputs) are kept.
    #[serde(with = "humantime_serde")]
    pub keep: Duration,
    /// The largest input file, in bytes.
    pub max_file_bytes: u64,
    /// Items queued in all jobs at most: a job that would go past it is refused (503 with
    /// `Retry-After`), never accepted and dropped.
    pub max_queued_items: u64,
}

impl Default for BatchesConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            lane: None,
            concurrency: 64,
            lease: Duration::from_secs(60),
            keep: Duration::from_secs(30 * 86_400),
            max_file_bytes: 100 * 1024 * 1024,
            max_queued_items: 200_000,
        }
    }
}

impl BatchesConfig {
    /// The lane items wait in, among `lanes`: the one named, else `batch`, else the last.
    pub fn lane_in<'a>(&self, lanes: &'a [String]) -> Option<&'a String> {
        match &self.lane {
            Some(name) => lanes.iter().find(|l| *l == name),
            None => lanes
                .iter()
                .find(|l| l.as_str() == "batch")
                .or_else(|| lanes.last()),
        }
    }
}

/// What types cannot check of `[batches]`.
pub(super) fn check(
    doc: &Document<'_>,
    b: &BatchesConfig,
    lanes: &[String],
    diags: &mut Vec<Diagnostic>,
) {
    let at = |field: &str| [Seg::Key("batches".into()), Seg::Key(field.into())];
    if let Some(lane) = &b.lane
        && !lanes.contains(lane)
    {
        diags.push(doc.diag(
            &at("lane"),
            format!("no lane `{lane}`; lanes: {}", lanes.join(", ")),
        ));
    }
    if b.concurrency == 0 {
        diags.push(doc.diag(&at("concurrency"), "must be at least 1"));
    }
    if b.lease < Duration::from_secs(1) {
        diags.push(doc.diag(&at("lease"), "must be at least 1s"));
    }
    if b.keep < Duration::from_secs(3600) {
        diags.push(doc.diag(&at("keep"), "must be at least 1h"));
    }
    if b.max_file_bytes == 0 || b.max_queued_items == 0 {
        let field = if b.max_file_bytes == 0 {
            "max_file_bytes"
        } else {
            "max_queued_items"
        };
        diags.push(doc.diag(&at(field), "must be at least 1"));
    }
}
