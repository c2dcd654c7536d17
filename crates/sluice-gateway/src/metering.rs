//! Credits and quotas at the door: a call's worst case (its prompt's tokens, counted, plus
//! `max_tokens`, at the routed model's full price) is reserved for its tenant before it is
//! sent, and settled from what it really used once it ends (see `Call`).

use std::sync::Arc;
use std::time::SystemTime;

use sluice_core::{ChatRequest, DEFAULT_OUTPUT_ESTIMATE, ErrorKind, GatewayError, Usage};
use sluice_economy::{Micros, Refusal, Reservation, estimate};
use tokio::time::Instant;

use crate::Gateway;
use crate::routing::Deployment;

/// Reserves `request`'s worst case for `tenant` on deployment `d`; `None` when the tenant
/// has no credits or quotas. A refusal is 402 (credits) or 429 with `Retry-After` and the
/// IETF `RateLimit` / `RateLimit-Policy` fields (quotas).
pub fn reserve(
    gw: &Gateway,
    tenant: Option<&Arc<str>>,
    d: &Deployment,
    request: &ChatRequest,
) -> Result<Option<Reservation>, GatewayError> {
    let Some(tenant) = tenant else {
        return Ok(None);
    };
    if gw.accounts.limits(tenant).is_none() {
        return Ok(None);
    }
    let prompt = estimate::prompt_tokens(request);
    let output = request.max_tokens().unwrap_or(DEFAULT_OUTPUT_ESTIMATE);
    let worst = Usage {
        prompt_tokens: prompt,
        completion_tokens: output,
        ..Usage::default()
    };
    let cost = gw.catalog.cost(&d.model, &worst).unwrap_or(Micros::ZERO);
    gw.accounts
        .reserve(
            tenant,
            Instant::now(),
            SystemTime::now(),
            prompt + output,
            cost,
        )
        .map_err(|r| refusal(&r))
}

fn refusal(r: &Refusal) -> GatewayError {
    match r {
        Refusal::OutOfCredits { .. } => {
            GatewayError::new(ErrorKind::InsufficientCredits, r.to_string())
        }
        Refusal::OverQuota {
            policy,
            limit,
            window_secs,
            retry_after,
            ..
        } => {
            let secs = retry_after.as_secs_f64().ceil().max(1.0);
            GatewayError::new(
                ErrorKind::QuotaExceeded,
                format!("{r}; retry after {secs} s"),
            )
            .with_retry_after(*retry_after)
            .with_header(
                "ratelimit-policy",
                format!("\"{policy}\";q={limit};w={window_secs}"),
            )
            .with_header("ratelimit", format!("\"{policy}\";r=0;t={secs}"))
        }
    }
}
