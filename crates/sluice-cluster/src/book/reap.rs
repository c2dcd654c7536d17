//! A dead instance's holds: an instance silent for three heartbeats is taken as dead, and the
//! others settle each of its holds at what the ledger's rows naming it say the call spent, or
//! release it unspent where no row does (the call never finished). Never charged blind;
//! `hold_ttl` stays as the last resort, for a cluster without a ledger to read.

use std::sync::Arc;
use std::time::SystemTime;

use sluice_economy::{HoldRows, Micros};

use super::{RedisAccounts, day, month};
use crate::health::Kind;

impl RedisAccounts {
    /// Has `rows` (the ledger) settle the holds of instances that went silent.
    pub fn settle_dead_from(&self, rows: Arc<dyn HoldRows>) {
        let _ = self.rows.set(rows);
    }

    /// Settles every hold of the instances `dead` from the ledger's rows; how many.
    pub async fn reap(&self, dead: &[String]) -> usize {
        let Some(rows) = self.rows.get() else {
            return 0;
        };
        let mut settled = 0;
        for tenant in self.limits.tenants() {
            let (acct, holds) = self.keys(&tenant);
            let ids: Vec<String> = match self
                .redis
                .query(redis::cmd("ZRANGE").arg(&holds).arg(0).arg(-1))
                .await
            {
                Ok(ids) => ids,
                Err(e) => {
                    self.health.failed(Kind::Budgets, &e);
                    return settled;
                }
            };
            let theirs: Vec<String> = ids
                .into_iter()
                .filter(|id| {
                    id.rsplit_once('-')
                        .is_some_and(|(instance, _)| dead.iter().any(|d| d == instance))
                })
                .collect();
            if theirs.is_empty() {
                continue;
            }
            let spent = match rows.spent_under(&theirs).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "a dead instance's holds wait: the ledger did not answer");
                    return settled;
                }
            };
            let tpm = self.limits.limits(&tenant).and_then(|l| l.tpm).unwrap_or(0);
            let wall = SystemTime::now();
            for id in &theirs {
                let (tokens, cost) = spent.get(id).copied().unwrap_or((0, Micros::ZERO));
                let done = self
                    .redis
                    .eval::<i64>(&self.settle, |i| {
                        i.key(&acct)
                            .key(&holds)
                            .arg(id)
                            .arg(tokens)
                            .arg(cost.0)
                            .arg(tpm)
                            .arg(day(wall))
                            .arg(month(wall));
                    })
                    .await;
                match done {
                    Ok(1) => settled += 1,
                    Ok(_) => {}
                    Err(e) => {
                        self.health.failed(Kind::Budgets, &e);
                        return settled;
                    }
                }
            }
            tracing::warn!(
                tenant = %tenant,
                holds = theirs.len(),
                from_rows = spent.len(),
                "a dead instance's holds were settled from the ledger's rows (released where none)"
            );
        }
        settled
    }
}
