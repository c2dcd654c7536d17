//! The runner: claims items while it has room (at most `concurrency` in flight; they wait
//! in the batch lane's queue for the slots interactive traffic leaves, and give them back
//! as soon as interactive requests wait), runs each through the walk, and ends it together
//! with its bill: its ledger row is committed first, then the item ends under its claim. A
//! crash between the two sends the item again, and the ledger keeps one row per item, so an
//! item is billed once whatever happens. Beside it: the heartbeat that renews this gateway's
//! leases, and the keeper that ends jobs, expires what their window left queued, and deletes
//! what is past the retention.

use std::sync::Arc;
use std::time::Duration;

use sluice_batch::state::{self, Due};
use sluice_batch::{Claimed, Kind};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::item::{self, Outcome};
use super::{Batches, api, ms, now_ms};
use crate::Gateway;
use crate::walk::Walker;

/// How often what is past the retention is deleted.
const SWEEP_EVERY: Duration = Duration::from_secs(3_600);

/// Runs `batches` through `walker` until its gateway drains.
pub async fn run(walker: Walker, batches: Arc<Batches>) {
    let gw = walker.gateway().clone();
    if !batches.jobs.shared() {
        // An embedded store belongs to this process alone: what it held at its last run
        // ended with that process, and is sent again.
        match batches.jobs.requeue_running().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                items = n,
                "batch items in flight at the last stop queued again"
            ),
            Err(e) => tracing::error!(error = %e, "batch store: requeueing items in flight failed"),
        }
    }
    let heart = tokio::spawn(heartbeat(batches.clone()));
    let keeper = tokio::spawn(keeper(gw.clone(), batches.clone()));
    // Documents (many calls each) in slots of their own, beside the calls.
    let documents = batches.documents.get().map(|d| {
        tokio::spawn(claim_and_run(
            walker.clone(),
            batches.clone(),
            Kind::Documents,
            d.slots(),
        ))
    });
    let calls = batches.settings.concurrency as usize;
    claim_and_run(walker, batches.clone(), Kind::Calls, calls).await;
    if let Some(documents) = documents {
        let _ = documents.await;
    }
    heart.abort();
    keeper.abort();
}

/// Claims items of `kind` while one of its `slots` is free and runs each, until the gateway
/// drains.
async fn claim_and_run(walker: Walker, batches: Arc<Batches>, kind: Kind, slots: usize) {
    let gw = walker.gateway();
    let slots = Arc::new(Semaphore::new(slots.max(1)));
    let s = &batches.settings;
    while !gw.is_draining() {
        let free = slots.available_permits();
        if free == 0 {
            // Wait for a slot to come back, then claim.
            if slots.clone().acquire_owned().await.is_err() {
                break;
            }
            continue;
        }
        let want = u32::try_from(free).unwrap_or(u32::MAX);
        let claimed = match batches
            .jobs
            .claim(kind, &batches.owner, want, now_ms(), ms(s.lease))
            .await
        {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "batch store: claiming items failed; trying again");
                tokio::time::sleep(s.poll).await;
                continue;
            }
        };
        if claimed.is_empty() {
            tokio::select! {
                () = batches.submitted(kind).notified() => {}
                () = tokio::time::sleep(s.poll) => {}
            }
            continue;
        }
        for c in claimed {
            let Ok(permit) = slots.clone().acquire_owned().await else {
                break;
            };
            tokio::spawn(run_item(walker.clone(), batches.clone(), c, permit));
        }
    }
}

async fn run_item(walker: Walker, batches: Arc<Batches>, c: Claimed, _slot: OwnedSemaphorePermit) {
    let gw = walker.gateway();
    let jobs = &batches.jobs;
    let b = match jobs.batch(None, &c.batch_id).await {
        Ok(Some(b)) => b,
        Ok(None) => return,
        Err(e) => {
            tracing::error!(error = %e, batch = %c.batch_id, "batch store: reading a job failed");
            gw.telemetry().batch_item("store_failed");
            return;
        }
    };
    match item::run(&walker, &batches, &b, &c).await {
        Outcome::Again { wait, entry } => {
            if let (Some(ledger), Some(entry)) = (gw.ledger(), entry) {
                ledger.record(entry);
            }
            tokio::time::sleep(wait).await;
            gw.telemetry().batch_item("requeued");
            if let Err(e) = jobs.release(&c).await {
                tracing::error!(error = %e, batch = %c.batch_id, "batch store: requeueing an item failed");
            }
        }
        Outcome::Ended(ending, entry) => {
            if let (Some(ledger), Some(mut entry)) = (gw.ledger(), entry) {
                entry.batch_item = Some(c.ledger_key().into());
                // The bill first: an item whose bill is not durable is not ended, and is sent
                // again (its lease runs out, or the next start queues it); the ledger keeps
                // one row per item.
                if let Err(e) = ledger.append(entry).await {
                    tracing::error!(error = %e, batch = %c.batch_id, line = c.line, "ledger: an item's row could not be written; the item will be sent again");
                    gw.telemetry().batch_item("store_failed");
                    return;
                }
            }
            let outcome = match &ending {
                sluice_batch::Ending::Answered { status, .. } if (200..300).contains(status) => {
                    "done"
                }
                sluice_batch::Ending::Cancelled => "cancelled",
                _ => "failed",
            };
            match jobs.end_item(&c, &ending, now_ms()).await {
                Ok(true) => gw.telemetry().batch_item(outcome),
                Ok(false) => gw.telemetry().batch_item("lost_claim"),
                Err(e) => {
                    tracing::error!(error = %e, batch = %c.batch_id, line = c.line, "batch store: an item's end could not be written; it will be sent again");
                    gw.telemetry().batch_item("store_failed");
                }
            }
        }
    }
}

/// Renews this gateway's leases a few times per lease, so that only a gateway that stopped
/// loses its items.
async fn heartbeat(batches: Arc<Batches>) {
    let every = batches.settings.lease / 3;
    loop {
        tokio::time::sleep(every).await;
        let lease = ms(batches.settings.lease);
        if let Err(e) = batches.jobs.renew(&batches.owner, now_ms(), lease).await {
            tracing::error!(error = %e, "batch store: renewing leases failed");
        }
    }
}

/// Ends jobs whose items all ended, expires the queued items of jobs whose window closed,
/// and deletes files and ended jobs past the retention.
/// Jobs are looked at every `poll`.
async fn keeper(gw: Arc<Gateway>, batches: Arc<Batches>) {
    let mut swept: Option<tokio::time::Instant> = None;
    loop {
        tokio::time::sleep(batches.settings.poll).await;
        if let Err(e) = look(&gw, &batches).await {
            tracing::error!(error = %e, "batch store: looking at open jobs failed");
        }
        if swept.is_none_or(|at| at.elapsed() >= SWEEP_EVERY) {
            swept = Some(tokio::time::Instant::now());
            let before = now_ms().saturating_sub(ms(batches.settings.keep));
            match batches.jobs.sweep(before).await {
                Ok((0, 0)) => {}
                Ok((files, jobs)) => tracing::info!(
                    files,
                    jobs,
                    "batch files and jobs past the retention deleted"
                ),
                Err(e) => tracing::error!(error = %e, "batch store: deleting old files failed"),
            }
        }
    }
}

/// One look at the open jobs.
pub(crate) async fn look(gw: &Gateway, batches: &Batches) -> Result<(), sluice_batch::BatchError> {
    for b in batches.jobs.open_batches().await? {
        if b.cancel_ms.is_some() {
            // Cancelled, maybe through another gateway: what waits here is withdrawn.
            batches.withdrawals.withdraw(&b.id);
        }
        let now = now_ms();
        let counts = batches.jobs.counts(&b.id).await?;
        match state::due(api::facts(&b, now), &counts) {
            Due::Wait => {}
            Due::ExpireQueued => {
                batches.jobs.expire_queued(&b.id, now).await?;
            }
            Due::End(status) => {
                api::end(gw, batches, &b.id, status, now).await?;
                batches.withdrawals.forget(&b.id);
            }
        }
    }
    Ok(())
}
