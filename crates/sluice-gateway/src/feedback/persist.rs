//! What automatic routers learnt, kept in the ledger's store across restarts: saved when it
//! changed (by the server's saver, and at shutdown), read back before the gateway is built.

use std::sync::Arc;

use sluice_ledger::{LedgerError, Store, StoredBelief};
use sluice_routing::auto::{Belief, Stored};

use crate::Gateway;

/// The store's row of one (task, candidate).
pub fn to_row(s: &Stored) -> StoredBelief {
    StoredBelief {
        task: s.task.clone(),
        group: s.group.clone(),
        alpha: s.belief.alpha,
        beta: s.belief.beta,
        output_tokens: s.output,
        cached_share: s.cached,
    }
}

/// One (task, candidate) from the store's row.
pub fn from_row(r: &StoredBelief) -> Stored {
    Stored {
        task: r.task.clone(),
        group: r.group.clone(),
        belief: Belief {
            alpha: r.alpha,
            beta: r.beta,
        },
        output: r.output_tokens,
        cached: r.cached_share,
    }
}

/// What `store` holds of router `name`, to start it from.
pub async fn load<S: Store>(store: &S, name: &str) -> Result<Vec<Stored>, LedgerError> {
    Ok(store.beliefs(name).await?.iter().map(from_row).collect())
}

impl Gateway {
    /// Saves what each automatic router learnt since its last save to the ledger's store;
    /// returns how many routers were saved (none without a store).
    pub async fn save_routers(&self) -> Result<usize, LedgerError> {
        let Some((_, store)) = &self.ledger else {
            return Ok(0);
        };
        let mut saved = 0;
        for (name, router) in self.routes.routers() {
            let (version, rows) = {
                let r = router.lock();
                if self.learning.saved_version(name) == Some(r.version()) {
                    continue;
                }
                (
                    r.version(),
                    r.export().iter().map(to_row).collect::<Vec<_>>(),
                )
            };
            store.save_beliefs(name, &rows).await?;
            self.learning.mark_saved(Arc::clone(name), version);
            saved += 1;
        }
        Ok(saved)
    }
}
