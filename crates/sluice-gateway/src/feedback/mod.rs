//! What clients tell automatic routers: `POST /v1/feedback` and its refusals (`api`), and
//! saving and loading what routers learnt in the ledger's store (`persist`). What they
//! learn from, and the answers waiting for a score, are `crate::learning`'s.

pub mod api;
pub mod persist;
