//! Credits and quotas at the door: a call's worst case (its prompt's tokens, counted, plus
//! `max_tokens`, at the routed model's full price) is reserved for its tenant before it is
//! sent, and settled from what it really used once it ends (see `Call`). At start, accounts
//! are restored from the ledger, so a restart gives no one their credits back.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use sluice_core::calendar;
use sluice_core::{ChatRequest, DEFAULT_OUTPUT_ESTIMATE, ErrorKind, GatewayError};
use sluice_economy::{Micros, Refusal, Reservation, hold};
use sluice_ledger::{GroupBy, LedgerError, Store, UsageQuery, UsageRow};
use tokio::time::Instant;

use crate::Gateway;
use crate::tenants::Tenants;
use sluice_routing::Deployment;

/// Reserves `request`'s worst case for `tenant` on deployment `d`; `None` when the tenant
/// has no credits or quotas. A refusal is 402 (credits) or 429 with `Retry-After` and the
/// IETF `RateLimit` / `RateLimit-Policy` fields (quotas).
pub async fn reserve(
    tenants: &Tenants,
    tenant: Option<&Arc<str>>,
    d: &Deployment,
    request: &ChatRequest,
) -> Result<Option<Reservation>, GatewayError> {
    let Some(tenant) = tenant else {
        return Ok(None);
    };
    let Some(limits) = tenants.accounts.limits(tenant) else {
        return Ok(None);
    };
    let prompt = tenants.tokenizer.prompt_tokens(request);
    let output = request.max_tokens().unwrap_or(DEFAULT_OUTPUT_ESTIMATE);
    let worst = hold::worst_case(prompt, output);
    let Some(cost) = hold::held_at(d.price.as_ref(), tenants.pricing.unpriced, &limits, &worst)
    else {
        return Err(unpriced(tenant, d, &tenants.pricing.catalog));
    };
    tenants
        .accounts
        .reserve(
            tenant,
            Instant::now(),
            SystemTime::now(),
            prompt + output,
            cost,
        )
        .await
        .map_err(|r| refusal(&r))
}

/// After a restart, gives every tenant with credits or quotas back what the ledger says it
/// spent: in all (against its credits), this UTC month (its spend quota) and today (its
/// tokens quota). Returns how many tenants were restored.
pub async fn restore_accounts(gw: &Gateway, wall: SystemTime) -> Result<usize, LedgerError> {
    // With no tenant holding credits or quotas there is nothing to restore, and no reason to
    // read the whole ledger at start.
    let tenants = gw.tenants.accounts.tenants();
    if tenants.is_empty() || gw.usage_store().is_none() {
        return Ok(0);
    }
    restore(gw, None, &tenants, wall).await?;
    Ok(tenants.len())
}

/// Gives `tenant`, whose account was just made, what the ledger says it has spent (after
/// the ledger's pending rows are written): its spend to date counts against the limits it
/// was given.
pub async fn restore_tenant(
    gw: &Gateway,
    tenant: &str,
    wall: SystemTime,
) -> Result<(), LedgerError> {
    if let Some(ledger) = gw.ledger() {
        ledger.flush().await?;
    }
    restore(gw, Some(tenant), &[Arc::from(tenant)], wall).await
}

/// Restores `tenants`' spend from the ledger (the query limited to `only`, when given).
async fn restore(
    gw: &Gateway,
    only: Option<&str>,
    tenants: &[Arc<str>],
    wall: SystemTime,
) -> Result<(), LedgerError> {
    let Some(store) = gw.usage_store() else {
        return Ok(());
    };
    let ((y, m), _) = calendar::month_of(wall);
    let month_start = calendar::days_from_civil(y, m, 1) * 86_400_000;
    let day_start = calendar::day_of(wall).0 * 86_400_000;
    let by_tenant = |from_ms: Option<i64>| UsageQuery {
        tenant: only.map(str::to_string),
        from_ms,
        group_by: vec![GroupBy::Tenant],
        ..UsageQuery::default()
    };
    let all = store.usage(&by_tenant(None)).await?;
    let month = store.usage(&by_tenant(Some(month_start))).await?;
    let today = store.usage(&by_tenant(Some(day_start))).await?;
    let find = |rows: &[UsageRow], tenant: &str| {
        rows.iter()
            .find(|r| r.keys.first().and_then(|k| k.as_deref()) == Some(tenant))
            .cloned()
            .unwrap_or_default()
    };
    for tenant in tenants {
        let (a, mo, d) = (
            find(&all, tenant),
            find(&month, tenant),
            find(&today, tenant),
        );
        gw.tenants.accounts.restore(
            tenant,
            wall,
            Micros(a.cost_micros),
            Micros(mo.cost_micros),
            d.prompt_tokens + d.completion_tokens,
        );
    }
    Ok(())
}

/// The refusal of a call that would spend a tenant's money on a model with no price.
fn unpriced(tenant: &str, d: &Deployment, catalog: &sluice_economy::Catalog) -> GatewayError {
    tracing::warn!(tenant, deployment = %d.name, model = %d.model, "refused: the model has no price");
    let why = match catalog.unconverted(&d.model) {
        Some(c) => format!(
            "is priced in {c} and [billing] has no rate from {c} to {billing}; \
             set [billing] rates = {{ {c} = N }} (what one {c} is worth in {billing})",
            billing = catalog.billing()
        ),
        None => format!(
            "has no price; price it in [prices.\"{}\"] (or set [billing] unpriced = \"free\")",
            d.model
        ),
    };
    GatewayError::new(
        ErrorKind::PermissionDenied,
        format!(
            "model `{}` of deployment `{}` {why}, and tenant `{tenant}` pays by credits or a spend quota",
            d.model, d.name
        ),
    )
}

fn refusal(r: &Refusal) -> GatewayError {
    match r {
        Refusal::OutOfCredits { .. } => {
            GatewayError::new(ErrorKind::InsufficientCredits, r.to_string())
        }
        Refusal::Unavailable { .. } => GatewayError::new(ErrorKind::Overloaded, r.to_string())
            .with_retry_after(Duration::from_secs(1)),
        Refusal::OverQuota {
            policy,
            limit,
            window_secs,
            remaining,
            retry_after,
            ..
        } => {
            let secs = retry_after.as_secs_f64().ceil().max(1.0);
            // People read the time (UTC) it is enough again; machines read Retry-After.
            let at = humantime::format_rfc3339_seconds(
                SystemTime::now() + Duration::from_secs_f64(secs),
            );
            GatewayError::new(
                ErrorKind::QuotaExceeded,
                format!("{r}; {remaining} left, too few for this request; enough again at {at} (in {secs} s)"),
            )
            .with_retry_after(*retry_after)
            .with_header(
                "ratelimit-policy",
                format!("\"{policy}\";q={limit};w={window_secs}"),
            )
            .with_header("ratelimit", format!("\"{policy}\";r={remaining};t={secs}"))
        }
    }
}
