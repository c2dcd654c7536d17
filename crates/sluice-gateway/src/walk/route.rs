//! Which model group a request goes to: the one it names, or, when it names a task route
//! (`auto`, say), the one the route's rules choose for what the request says of itself; and,
//! when a group cannot take it, the fallbacks to try, in order. The decisions are
//! `sluice-routing`'s (`rules`, `fallback`); this step gathers their facts and records them.

use std::sync::Arc;
use std::sync::OnceLock;

use http::HeaderMap;
use serde_json::Value;
use sluice_core::{ChatRequest, ErrorKind, GatewayError, RouteTaken};
use sluice_routing::ModelGroup;
use sluice_routing::fallback::Reason;
use sluice_routing::rules::{Facts, Script};

use super::auth::Identity;
use super::call::{Call, Chosen, NotRouted, Routed};
use crate::Gateway;

/// `x-sluice-task`: the task a request declares (else its body's `metadata.task`).
pub const TASK_HEADER: &str = "x-sluice-task";

/// The prompt's size in tokens, counted (as the ledger counts them) at most once, and only
/// when a rule or a context window needs it.
pub struct PromptSize<'r> {
    request: &'r ChatRequest,
    tokens: OnceLock<u64>,
}

impl<'r> PromptSize<'r> {
    /// The size of `request`'s prompt, not yet counted.
    pub fn of(request: &'r ChatRequest) -> Self {
        Self {
            request,
            tokens: OnceLock::new(),
        }
    }

    /// The prompt's tokens.
    pub fn tokens(&self, gw: &Gateway) -> u64 {
        *self
            .tokens
            .get_or_init(|| gw.tenants.tokenizer.prompt_tokens(self.request))
    }
}

impl From<GatewayError> for NotRouted {
    fn from(error: GatewayError) -> Self {
        Self { error, group: None }
    }
}

/// The group `request` goes to first, and, when an automatic router chose it, the other
/// candidates in the order to fall back to, with what chose it. The caller's key must allow
/// the name it sent (a key allowed `auto` may use whatever `auto` chooses). `asked`: the
/// client's own time budget.
pub fn choose<'g>(
    gw: &'g Gateway,
    call: &Call,
    request: &ChatRequest,
    asked_task: &Result<Option<String>, GatewayError>,
    caller: &Identity,
    size: &PromptSize<'_>,
    asked: Option<std::time::Duration>,
) -> Result<Chosen<'g>, NotRouted> {
    if let Some(router) = gw.routes.router(&request.model) {
        caller.may_use(&request.model)?;
        let task = task(asked_task, request)?;
        let now = tokio::time::Instant::now();
        // The same body under another task is another request (its first answer is not
        // scored by it).
        let hash = crate::learning::with_task(crate::learning::body_hash(request), task.as_deref());
        let id = call.record().request_id.clone();
        gw.learning.arrived(
            &gw.routes,
            gw.telemetry(),
            caller.tenant.as_ref(),
            hash,
            &id,
            now,
        );
        return Ok(super::auto::choose(
            gw,
            call,
            router,
            request,
            task.as_deref(),
            asked,
        )?);
    }
    let Some(route) = gw.routes.task_route(&request.model) else {
        let group = gw
            .routes
            .group_among(&request.model, |g| caller.allows(g))?;
        if let Err(error) = caller.may_use(&group.name) {
            return Err(NotRouted {
                error,
                group: Some(group.name.clone()),
            });
        }
        return Ok(Chosen {
            group,
            others: Vec::new(),
            routed: Routed {
                group: group.name.clone(),
                route: None,
            },
        });
    };
    caller.may_use(&route.name)?;
    let task = task(asked_task, request)?;
    let text = route.reads_script().then(|| request.prompt_text());
    let facts = Facts {
        task: task.as_deref(),
        tenant: caller.tenant.as_deref(),
        key: caller.key.as_ref().map(|k| k.spec.name.as_str()),
        prompt_tokens: route.counts_tokens().then(|| size.tokens(gw)),
        tools: present(request, "tools"),
        images: request
            .field("messages")
            .is_some_and(|m| memchr::memmem::find(m, b"\"image_url\"").is_some()),
        response_format: present(request, "response_format"),
        script: text.as_deref().map(Script::of),
    };
    let routed = route.decide(&facts);
    let group = gw.routes.group(routed.group)?;
    Ok(Chosen {
        group,
        others: Vec::new(),
        routed: Routed {
            group: group.name.clone(),
            route: Some(RouteTaken {
                route: route.name.clone(),
                rule: routed.rule,
                group: group.name.clone(),
                unknown_task: routed.unknown_task,
                auto: None,
            }),
        },
    })
}

/// Whether `field` is in the body and neither `null` nor empty.
fn present(request: &ChatRequest, field: &str) -> bool {
    request
        .field(field)
        .is_some_and(|v| !matches!(v, b"null" | b"[]" | b"{}"))
}

/// The task `x-sluice-task` declares, trimmed (empty when the header says nothing); a
/// malformed one is a 400 naming the header.
pub fn task_header(headers: &HeaderMap) -> Result<Option<String>, GatewayError> {
    let Some(v) = headers.get(TASK_HEADER) else {
        return Ok(None);
    };
    let t = v.to_str().map_err(|_| {
        GatewayError::new(
            ErrorKind::InvalidRequest,
            "x-sluice-task must be visible ASCII text",
        )
        .with_param(TASK_HEADER)
    })?;
    Ok(Some(t.trim().to_string()))
}

/// The task the request declares: the one it asked for (`x-sluice-task`; an empty one
/// declares none), else `metadata.task`; a malformed one is a 400 naming where it was.
fn task(
    asked: &Result<Option<String>, GatewayError>,
    request: &ChatRequest,
) -> Result<Option<String>, GatewayError> {
    if let Some(t) = asked.as_ref().map_err(Clone::clone)? {
        return Ok(Some(t.clone()).filter(|t| !t.is_empty()));
    }
    let Some(metadata) = request.value("metadata") else {
        return Ok(None);
    };
    match metadata.get("task") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(t)) => Ok(Some(t.clone())),
        Some(_) => Err(GatewayError::new(
            ErrorKind::InvalidRequest,
            "metadata.task must be a string",
        )
        .with_param("metadata.task")),
    }
}

/// The groups to try after `first`, in order: `head` (a router's other candidates), then
/// `first`'s fallbacks, then theirs (breadth first), each once, leaving out those the
/// caller's key may not use.
pub fn fallbacks<'g>(
    gw: &'g Gateway,
    first: &ModelGroup,
    head: Vec<&'g ModelGroup>,
    caller: &Identity,
) -> Vec<&'g ModelGroup> {
    if first.fallbacks.is_empty() && head.is_empty() {
        return Vec::new(); // no allocation for the groups that have none
    }
    let mut order: Vec<&ModelGroup> = Vec::new();
    let mut seen: Vec<Arc<str>> = vec![first.name.clone()];
    let mut queue: std::collections::VecDeque<Arc<str>> = head
        .iter()
        .map(|g| g.name.clone())
        .chain(first.fallbacks.iter().cloned())
        .collect();
    while let Some(name) = queue.pop_front() {
        if seen.contains(&name) {
            continue;
        }
        seen.push(name.clone());
        let Ok(group) = gw.routes.group(&name) else {
            continue;
        };
        queue.extend(group.fallbacks.iter().cloned());
        if caller.may_use(&group.name).is_ok() {
            order.push(group);
        }
    }
    order
}

/// A 400 for a prompt that fits none of `group`'s context windows, naming the sizes.
pub fn too_long(group: &ModelGroup, prompt: u64, output: u64) -> GatewayError {
    let window = group.smallest_window().unwrap_or(0);
    GatewayError::new(
        ErrorKind::ContextLengthExceeded,
        format!(
            "the prompt ({prompt} tokens) and max_tokens ({output}) do not fit the context window of model `{}` ({window} tokens)",
            group.name
        ),
    )
    .with_param("messages")
}

/// Whether `group` may take the request by its size: every deployment's context window is
/// known to be too small only when the prompt could be that long (its body's bytes bound its
/// tokens), so most requests are never counted.
pub fn fits(
    gw: &Gateway,
    group: &ModelGroup,
    request: &ChatRequest,
    size: &PromptSize<'_>,
) -> Result<(), GatewayError> {
    let Some(smallest) = group.smallest_window() else {
        return Ok(());
    };
    let output = request.max_tokens().unwrap_or(0);
    if (request.body_len() as u64).saturating_add(output) <= smallest {
        return Ok(());
    }
    let prompt = size.tokens(gw);
    if group.fits(prompt, output) {
        Ok(())
    } else {
        Err(too_long(group, prompt, output))
    }
}

/// Records that the call left `from` for `to` for `reason`.
pub fn record_fallback(call: &mut Call, from: &ModelGroup, to: &ModelGroup, reason: Reason) {
    call.fell_back(&from.name, &to.name, reason.label());
}
