//! What Redis has not heard yet: settlements and spend made while it could not answer, kept
//! in order and told to it once it answers again.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use parking_lot::Mutex;
use sluice_economy::{Accounts, Micros};

use super::{RedisAccounts, day, month};
use crate::ClusterError;
use crate::health::Kind;

/// The most settlements kept for Redis while it cannot answer; past it the oldest are
/// dropped, counted and logged (the ledger still has every call).
const MAX_OWED: usize = 100_000;

/// A settlement or spend Redis has not heard yet.
#[derive(Debug)]
pub(super) enum Owed {
    /// A hold to settle at what its call used.
    Settle {
        tenant: Arc<str>,
        hold: u64,
        tokens: u64,
        cost: Micros,
        tpm: u64,
        wall: SystemTime,
    },
    /// Spend of a local share, made while Redis could not answer.
    Spend {
        tenant: Arc<str>,
        tokens: u64,
        cost: Micros,
        wall: SystemTime,
    },
}

impl RedisAccounts {
    /// Settlements and spend Redis has not heard yet.
    pub fn owed(&self) -> usize {
        self.owed.lock().len()
    }

    /// Settlements dropped because too many were owed while Redis could not answer.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    pub(super) fn owe(owed: &Mutex<VecDeque<Owed>>, dropped: &AtomicU64, o: Owed) {
        let mut q = owed.lock();
        if q.len() >= MAX_OWED {
            q.pop_front();
            dropped.fetch_add(1, Ordering::Relaxed);
            tracing::error!(
                "too many settlements owed to the cluster's Redis; the oldest is dropped (the ledger keeps the call)"
            );
        }
        q.push_back(o);
    }

    /// Tells Redis what it is owed, now that it answers; starts afresh the local shares of
    /// the outage that ended.
    pub(crate) async fn flush(&self) {
        if !self.shared_out.lock().is_empty() {
            self.shared_out.lock().clear();
            *self.fallback.lock() = Arc::new(Accounts::default());
        }
        loop {
            let Some(o) = self.owed.lock().pop_front() else {
                return;
            };
            if let Err(e) = self.send(&o).await {
                self.owed.lock().push_front(o);
                self.health.failed(Kind::Budgets, &e);
                return;
            }
        }
    }

    /// Tells Redis `o` in the background, or keeps it for when Redis answers again.
    pub(super) fn tell(&self, o: Owed) {
        if self.health.is_down() {
            Self::owe(&self.owed, &self.dropped, o);
            return;
        }
        let Some(me) = self.weak() else {
            Self::owe(&self.owed, &self.dropped, o);
            return;
        };
        tokio::spawn(async move {
            if let Err(e) = me.send(&o).await {
                me.health.failed(Kind::Budgets, &e);
                Self::owe(&me.owed, &me.dropped, o);
            }
        });
    }

    /// Sends `o` to Redis.
    async fn send(&self, o: &Owed) -> Result<(), ClusterError> {
        let (redis, book) = (&self.redis, self);
        match o {
            Owed::Settle {
                tenant,
                hold,
                tokens,
                cost,
                tpm,
                wall,
            } => {
                let (acct, holds) = book.keys(tenant);
                let id = book.hold_id(*hold);
                redis
                    .eval::<i64>(&book.settle, |i| {
                        i.key(&acct)
                            .key(&holds)
                            .arg(&id)
                            .arg(*tokens)
                            .arg(cost.0)
                            .arg(*tpm)
                            .arg(day(*wall))
                            .arg(month(*wall));
                    })
                    .await?;
            }
            Owed::Spend {
                tenant,
                tokens,
                cost,
                wall,
            } => {
                let (acct, _) = book.keys(tenant);
                redis
                    .eval::<i64>(&book.adjust, |i| {
                        i.key(&acct)
                            .arg(*tokens)
                            .arg(cost.0)
                            .arg(day(*wall))
                            .arg(month(*wall))
                            .arg(0)
                            .arg(0)
                            .arg(0);
                    })
                    .await?;
            }
        }
        Ok(())
    }
}
