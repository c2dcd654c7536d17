//! What types cannot check: values against each other, references between sections, URLs,
//! and the environment variables that hold secrets.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::Duration;

use crate::diagnostic::Diagnostic;
use crate::document::{Document, Seg};

use super::*;

mod cache;

pub(super) use cache::{cache, prefixes, semantic_refs};

/// `[keys.*]`; `routes` are the task routes' names, which a key may list like groups.
pub(super) fn keys(
    doc: &Document<'_>,
    keys: &[(String, KeyConfig)],
    lanes: &[(String, LaneParams)],
    models: &[(String, ModelGroupConfig)],
    routes: &[&str],
    diags: &mut Vec<Diagnostic>,
) {
    for (name, k) in keys {
        let at = |field: &str| key(&["keys", name, field]);
        for (field, problem) in k.spec.problems() {
            diags.push(doc.diag(&at(field), problem));
        }
        let hex = k.sha256.len() == 64 && k.sha256.bytes().all(|b| b.is_ascii_hexdigit());
        if !hex {
            diags.push(doc.diag(
                &at("sha256"),
                "must be the key's SHA-256, 64 hex digits (`sluice keys new` prints it)",
            ));
        }
        if let Some(lane) = &k.spec.lane
            && !lanes.iter().any(|(l, _)| l == lane)
        {
            diags.push(doc.diag(&at("lane"), format!("`{lane}` is not a lane")));
        }
        for m in &k.spec.models {
            if !models.iter().any(|(g, _)| g == m) && !routes.contains(&m.as_str()) {
                diags.push(doc.diag(
                    &at("models"),
                    format!("`{m}` is not a model group or a route"),
                ));
            }
        }
    }
}

pub(super) fn lanes(
    doc: &Document<'_>,
    lanes: &[(String, LaneParams)],
    diags: &mut Vec<Diagnostic>,
) {
    for (name, l) in lanes {
        for (field, problem) in l.problems() {
            diags.push(doc.diag(&key(&["lanes", name, field]), problem));
        }
    }
    if let Some(problem) = sluice_tail::admission::shares_problem(lanes.iter().map(|(_, l)| l)) {
        diags.push(doc.diag(&key(&["lanes"]), problem));
    }
}

fn group_policies(
    doc: &Document<'_>,
    group: &str,
    m: &ModelGroupConfig,
    diags: &mut Vec<Diagnostic>,
) {
    let at = |section: &str, field: &str| {
        let mut at = key(&["models", group, section]);
        if !field.is_empty() {
            at.push(Seg::Key(field.to_string()));
        }
        at
    };
    // Each policy's own checks, named at its section.
    let owned = [
        ("hedge", m.hedge.written().map(|h| h.problems())),
        ("affinity", m.affinity.map(|a| a.problems())),
        ("limit", m.limit.written().map(|l| l.problems())),
        ("breaker", m.breaker.written().map(|b| b.problems())),
        ("retry", m.retry.written().map(|r| r.problems())),
        ("compress", m.compress.map(|c| c.problems())),
        ("prompt_cache_key", m.prompt_cache_key.map(|k| k.problems())),
        ("progressive", m.progressive.as_ref().map(|p| p.problems())),
    ];
    for (section, problems) in owned {
        for (field, problem) in problems.unwrap_or_default() {
            diags.push(doc.diag(&at(section, field), problem));
        }
    }
    if m.timeout.is_some_and(|t| t < Duration::from_millis(1)) {
        diags.push(doc.diag(&key(&["models", group, "timeout"]), "must be at least 1ms"));
    }
}

/// `[tenants.*]`: counts of at least 1, lanes that exist.
pub(super) fn tenants(
    doc: &Document<'_>,
    tenants: &[(String, TenantConfig)],
    lanes: &[(String, LaneParams)],
    diags: &mut Vec<Diagnostic>,
) {
    for (name, t) in tenants {
        for (field, problem) in t.limits.problems() {
            diags.push(doc.diag(&key(&["tenants", name, field]), problem));
        }
        if let Some(lane) = &t.lane
            && !lanes.iter().any(|(l, _)| l == lane)
        {
            let known: Vec<&str> = lanes.iter().map(|(l, _)| l.as_str()).collect();
            diags.push(doc.diag(
                &key(&["tenants", name, "lane"]),
                format!("`{lane}` is not a lane; lanes: {}", known.join(", ")),
            ));
        }
    }
}

fn key(parts: &[&str]) -> Vec<Seg> {
    parts.iter().map(|p| Seg::Key((*p).to_string())).collect()
}

/// The fewest characters an admin or metrics token may have.
pub const MIN_TOKEN_CHARS: usize = 16;

/// What makes `token` unfit to guard the admin API or `/metrics`: too short to resist
/// guessing, or an example's placeholder left in place.
fn weak_token(token: &str) -> Option<String> {
    let chars = token.trim().chars().count();
    if token.to_ascii_uppercase().contains("CHANGE-ME") {
        Some("is the example's placeholder (`CHANGE-ME`): set a secret of your own".into())
    } else if chars < MIN_TOKEN_CHARS {
        Some(format!(
            "has {chars} characters; a token needs at least {MIN_TOKEN_CHARS} (`openssl rand -hex 32` makes one)"
        ))
    } else {
        None
    }
}

/// `[server]`; `has_keys` is whether `[keys]` holds any. Returns the listen address.
pub(super) fn server(
    doc: &Document<'_>,
    s: &ServerConfig,
    has_keys: bool,
    env: &dyn Env,
    diags: &mut Vec<Diagnostic>,
    unset: &mut Vec<Diagnostic>,
    warnings: &mut Vec<Diagnostic>,
) -> Option<SocketAddr> {
    for (field, var) in [
        ("admin_token_env", &s.admin_token_env),
        ("metrics_token_env", &s.metrics_token_env),
    ] {
        let Some(var) = var.as_deref() else {
            continue;
        };
        match env.get(var) {
            None => unset.push(doc.diag(
                &key(&["server", field]),
                format!("environment variable `{var}` is not set"),
            )),
            Some(token) => {
                if let Some(why) = weak_token(&token) {
                    diags.push(doc.diag(
                        &key(&["server", field]),
                        format!("the token in `{var}` {why}"),
                    ));
                }
            }
        }
    }
    let open = s
        .listen
        .parse::<SocketAddr>()
        .is_ok_and(|a| !a.ip().is_loopback());
    if open && s.admin_token_env.is_none() {
        warnings.push(doc.diag(
            &key(&["server", "listen"]),
            format!(
                "`{}` takes connections from other machines and no `admin_token_env` is set: \
                 anyone who reaches it reads every tenant's usage and spend at /admin/*",
                s.listen
            ),
        ));
    }
    if s.require_keys == Some(false) && (has_keys || s.admin_token_env.is_some()) {
        let keys_from = if has_keys {
            "`[keys]` are configured"
        } else {
            "keys can be made through `POST /admin/keys`"
        };
        warnings.push(doc.diag(
            &key(&["server", "require_keys"]),
            format!(
                "is false while {keys_from}: requests without a valid key are still served; \
                 leave it out to refuse them once any key exists"
            ),
        ));
    }
    if s.shutdown_notice > s.shutdown_grace {
        diags.push(doc.diag(
            &key(&["server", "shutdown_notice"]),
            "must not be longer than `shutdown_grace`",
        ));
    }
    if s.max_body_bytes == 0 {
        diags.push(doc.diag(&key(&["server", "max_body_bytes"]), "must be at least 1"));
    }
    if s.max_connections == Some(0) {
        diags.push(doc.diag(&key(&["server", "max_connections"]), "must be at least 1"));
    }
    if s.header_timeout.is_zero() {
        diags.push(doc.diag(&key(&["server", "header_timeout"]), "must be more than 0s"));
    }
    if s.stall_timeout.is_zero() {
        diags.push(doc.diag(&key(&["server", "stall_timeout"]), "must be more than 0s"));
    }
    // hyper reads a request head into a buffer of at least 8 KiB.
    if s.max_header_bytes < 8192 {
        diags.push(doc.diag(
            &key(&["server", "max_header_bytes"]),
            "must be at least 8192",
        ));
    }
    if s.worker_threads
        .is_some_and(|n| !(1..=MAX_WORKER_THREADS).contains(&n))
    {
        diags.push(doc.diag(
            &key(&["server", "worker_threads"]),
            format!("must be between 1 and {MAX_WORKER_THREADS}"),
        ));
    }
    match s.listen.parse() {
        Ok(addr) => Some(addr),
        Err(_) => {
            diags.push(doc.diag(
                &key(&["server", "listen"]),
                format!("`{}` is not an address like 127.0.0.1:8080", s.listen),
            ));
            None
        }
    }
}

/// `[ledger]`; an unset URL variable goes to `unset`.
pub(super) fn ledger(
    doc: &Document<'_>,
    l: &LedgerConfig,
    env: &dyn Env,
    diags: &mut Vec<Diagnostic>,
    unset: &mut Vec<Diagnostic>,
) {
    let at = |field: &str| key(&["ledger", field]);
    match (l.store, &l.url_env) {
        (LedgerStoreKind::Postgres, None) => diags.push(doc.diag(
            &at("store"),
            "`postgres` needs `url_env`: the environment variable holding the database URL",
        )),
        (LedgerStoreKind::Postgres, Some(var)) if env.get(var).is_none() => unset.push(doc.diag(
            &at("url_env"),
            format!("environment variable `{var}` is not set"),
        )),
        (LedgerStoreKind::Sqlite | LedgerStoreKind::Off, Some(_)) => {
            diags.push(doc.diag(&at("url_env"), "only a `postgres` ledger reads a URL"))
        }
        _ => {}
    }
    if l.store == LedgerStoreKind::Sqlite && l.path.as_os_str().is_empty() {
        diags.push(doc.diag(&at("path"), "must name a file"));
    }
}

pub(super) fn telemetry(doc: &Document<'_>, t: &TelemetryConfig, diags: &mut Vec<Diagnostic>) {
    if t.latency_window_slices == 0 {
        diags.push(doc.diag(
            &key(&["telemetry", "latency_window_slices"]),
            "must be at least 1",
        ));
    } else if t.latency_window / t.latency_window_slices < Duration::from_millis(1) {
        diags.push(doc.diag(
            &key(&["telemetry", "latency_window"]),
            "each slice of the window must last at least 1 ms",
        ));
    }
}

pub(super) fn provider(
    doc: &Document<'_>,
    name: &str,
    p: &ProviderConfig,
    env: &dyn Env,
    diags: &mut Vec<Diagnostic>,
    unset: &mut Vec<Diagnostic>,
) {
    let at = |field: &str| key(&["providers", name, field]);
    let u = &p.upstream;
    match url::Url::parse(&u.base_url) {
        Ok(url) if matches!(url.scheme(), "http" | "https") => {}
        _ => diags.push(doc.diag(
            &at("base_url"),
            format!("`{}` is not an http(s) URL", u.base_url),
        )),
    }
    if let Some(var) = p.key_env()
        && env.get(var).is_none()
    {
        let field = match u.api_key_env {
            Some(_) => "api_key_env",
            None => "token_env",
        };
        unset.push(doc.diag(
            &at(field),
            format!("environment variable `{var}` is not set"),
        ));
    }
    if u.api_key_env.is_none()
        && let Some(Err(why)) = p.bedrock_auth(None, &|var| env.get(var))
    {
        unset.push(doc.diag(
            &at("kind"),
            format!("no AWS credentials to sign with: {why}"),
        ));
    }
    if let Some(file) = p.token_file()
        && let Err(e) = sluice_providers::token::check(file)
    {
        diags.push(doc.diag(&at("token_file"), format!("`{}`: {e}", file.display())));
    }
    for (header, value) in &u.headers {
        let name_ok = http_token(header);
        let value_ok = value
            .bytes()
            .all(|b| b == b'\t' || (0x20..0x7f).contains(&b));
        if !name_ok || !value_ok {
            diags.push(doc.diag(
                &key(&["providers", name, "headers", header]),
                "not a valid HTTP header",
            ));
        }
    }
    for (field, problem) in p.problems() {
        diags.push(doc.diag(&at(field), problem));
    }
}

fn http_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

pub(super) fn models(
    doc: &Document<'_>,
    models: &[(String, ModelGroupConfig)],
    providers: &HashSet<&str>,
    diags: &mut Vec<Diagnostic>,
) {
    for (group, m) in models {
        group_policies(doc, group, m, diags);
        if m.deployments.is_empty() {
            diags.push(doc.diag(
                &key(&["models", group, "deployments"]),
                "needs at least one deployment",
            ));
        }
        let mut names = HashSet::new();
        for (i, d) in m.deployments.iter().enumerate() {
            let at = |field: &str| {
                let mut p = key(&["models", group, "deployments"]);
                p.push(Seg::Index(i));
                p.push(Seg::Key(field.to_string()));
                p
            };
            if !providers.contains(d.provider.as_str()) {
                diags.push(doc.diag(
                    &at("provider"),
                    format!("no provider named `{}` in [providers]", d.provider),
                ));
            }
            if d.weight == 0 {
                diags.push(doc.diag(&at("weight"), "must be at least 1"));
            }
            for (field, v) in [("rpm", d.rpm), ("tpm", d.tpm)] {
                if v == Some(0) {
                    diags.push(doc.diag(&at(field), "must be at least 1 (leave it out for none)"));
                }
            }
            if !names.insert(d.display_name()) {
                diags.push(doc.diag(
                    &at("name"),
                    format!(
                        "deployment name `{}` is used twice in this group",
                        d.display_name()
                    ),
                ));
            }
        }
    }
}
