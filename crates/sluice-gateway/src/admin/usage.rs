//! `GET /admin/usage?tenant=&from=&to=&group_by=&format=`: tokens, cost, what caching saved
//! and what hedges and retries cost, totalled from the ledger by the columns asked for, as
//! JSON (the default) or CSV. Every call finished before the request is counted: the ledger
//! is flushed first.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use http::header;
use sluice_core::{ErrorKind, GatewayError, RequestId};
use sluice_ledger::report::{self, Format};
use sluice_ledger::{QueryError, Store, UsageQuery};

use crate::Gateway;
use crate::walk::rescue;

const PARAMS: [&str; 5] = ["tenant", "from", "to", "group_by", "format"];

fn refuse(e: &GatewayError) -> Response {
    rescue::error_response(
        e,
        &RequestId::generate(),
        None,
        sluice_ingress::Dialect::Chat,
    )
}

fn bad(message: String, param: &'static str) -> GatewayError {
    GatewayError::new(ErrorKind::InvalidRequest, message).with_param(param)
}

/// The query and format a request's parameters ask for.
fn parse(params: &HashMap<String, String>) -> Result<(UsageQuery, Format), GatewayError> {
    if let Some(unknown) = params.keys().find(|k| !PARAMS.contains(&k.as_str())) {
        return Err(GatewayError::new(
            ErrorKind::InvalidRequest,
            format!("unknown parameter `{unknown}`; use tenant, from, to, group_by, format"),
        )
        .with_param(unknown.clone()));
    }
    let get = |k: &str| params.get(k).map(String::as_str);
    let q =
        UsageQuery::parse(get("tenant"), get("from"), get("to"), get("group_by")).map_err(|e| {
            let param = match &e {
                QueryError::GroupBy(_) => "group_by",
                QueryError::Time { field, .. } => field,
                QueryError::EmptyRange => "from",
            };
            bad(e.to_string(), param)
        })?;
    let format = match get("format") {
        None | Some("json") => Format::Json,
        Some("csv") => Format::Csv,
        Some(other) => {
            return Err(bad(
                format!("format: {other:?} is not json or csv"),
                "format",
            ));
        }
    };
    Ok((q, format))
}

/// `GET /admin/usage`.
pub async fn usage(
    State(gw): State<Arc<Gateway>>,
    Query(params): Query<HashMap<String, String>>,
) -> Response {
    let (q, format) = match parse(&params) {
        Ok(v) => v,
        Err(e) => return refuse(&e),
    };
    let (Some(ledger), Some(store)) = (gw.ledger(), gw.usage_store()) else {
        return refuse(&GatewayError::new(
            ErrorKind::NotFound,
            "the usage ledger is off: set [ledger] store",
        ));
    };
    let read = async {
        ledger.flush().await?;
        store.usage(&q).await
    };
    match read.await {
        Ok(rows) => match format {
            Format::Csv => (
                [(header::CONTENT_TYPE, "text/csv; charset=utf-8")],
                report::csv(&q, &rows),
            )
                .into_response(),
            _ => {
                // Costs are in the billing currency; `native_cost_micros` in the providers'.
                let mut v = report::json(&q, &rows);
                v["currency"] = gw.tenants.pricing.catalog.billing().as_str().into();
                Json(v).into_response()
            }
        },
        Err(e) => {
            tracing::error!(error = %e, "usage query failed");
            refuse(&GatewayError::new(
                ErrorKind::Internal,
                format!("the usage ledger could not be read: {e}"),
            ))
        }
    }
}
