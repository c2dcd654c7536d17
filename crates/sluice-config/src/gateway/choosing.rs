//! Checks of what chooses the model: catalog overrides, fallbacks between groups (they must
//! exist and never loop), and task routes (their groups must exist, no rule may be
//! unreachable, and rules whose order decides are pointed out), and routers (candidates
//! that exist, settings in range).

use std::collections::HashSet;

use crate::diagnostic::Diagnostic;
use crate::document::words::closest;
use crate::document::{Document, Seg};

use super::{CatalogConfig, ModelGroupConfig, RouteParams, RouterParams};

fn key(parts: &[&str]) -> Vec<Seg> {
    parts.iter().map(|p| Seg::Key((*p).to_string())).collect()
}

/// `no group named `x`` with a did-you-mean when one is close.
fn unknown_group(name: &str, groups: &[&str]) -> String {
    let known: Vec<String> = groups.iter().map(|g| (*g).to_string()).collect();
    match closest(name, &known) {
        Some(near) => format!("no model group named `{name}`; did you mean `{near}`?"),
        None => format!(
            "no model group named `{name}`; groups: {}",
            groups.join(", ")
        ),
    }
}

/// `[catalog.MODEL]`: sizes of at least 1, an answer no longer than the window.
pub(super) fn catalog(
    doc: &Document<'_>,
    catalog: &[(String, CatalogConfig)],
    diags: &mut Vec<Diagnostic>,
) {
    for (model, c) in catalog {
        for (field, v) in [
            ("context_window", c.context_window),
            ("max_output", c.max_output),
        ] {
            if v == Some(0) {
                diags.push(doc.diag(&key(&["catalog", model, field]), "must be at least 1"));
            }
        }
        if let (Some(w), Some(o)) = (c.context_window, c.max_output)
            && o > w
        {
            diags.push(doc.diag(
                &key(&["catalog", model, "max_output"]),
                format!("is longer than the context window ({w})"),
            ));
        }
    }
}

/// `fallbacks` of each group: groups that exist, other than itself, with no cycle.
pub(super) fn fallbacks(
    doc: &Document<'_>,
    models: &[(String, ModelGroupConfig)],
    diags: &mut Vec<Diagnostic>,
) {
    let groups: Vec<&str> = models.iter().map(|(g, _)| g.as_str()).collect();
    for (group, m) in models {
        let at = key(&["models", group, "fallbacks"]);
        let mut seen = HashSet::new();
        // Each entry at its own path, so that every bad one is reported, not only the first.
        for (i, f) in m.fallbacks.iter().enumerate() {
            let mut entry = at.clone();
            entry.push(Seg::Index(i));
            if f == group {
                diags.push(doc.diag(&entry, format!("`{group}` cannot fall back to itself")));
            } else if !groups.contains(&f.as_str()) {
                diags.push(doc.diag(&entry, unknown_group(f, &groups)));
            } else if !seen.insert(f.as_str()) {
                diags.push(doc.diag(&entry, format!("`{f}` is named twice")));
            }
        }
        if let Some(path) = cycle_from(group, models) {
            diags.push(doc.diag(
                &at,
                format!("falls back in a circle: {}", path.join(" -> ")),
            ));
        }
    }
}

/// A path of fallbacks from `start` that comes back to it, if there is one.
fn cycle_from<'m>(
    start: &'m str,
    models: &'m [(String, ModelGroupConfig)],
) -> Option<Vec<&'m str>> {
    fn walk<'m>(
        at: &'m str,
        start: &'m str,
        models: &'m [(String, ModelGroupConfig)],
        path: &mut Vec<&'m str>,
        seen: &mut HashSet<&'m str>,
    ) -> bool {
        let Some((_, m)) = models.iter().find(|(g, _)| g == at) else {
            return false;
        };
        for next in &m.fallbacks {
            if next == at {
                continue; // said above, as falling back to itself
            }
            if next == start {
                path.push(next);
                return true;
            }
            if seen.insert(next.as_str()) {
                path.push(next);
                if walk(next, start, models, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![start];
    let mut seen = HashSet::from([start]);
    walk(start, start, models, &mut path, &mut seen).then_some(path)
}

/// `[routes.NAME]`: a name that is not a group's, groups that exist, sizes in order, no
/// rule that can never fire (an error), and rules whose order decides (a warning).
pub(super) fn routes(
    doc: &Document<'_>,
    routes: &[(String, RouteParams)],
    models: &[(String, ModelGroupConfig)],
    diags: &mut Vec<Diagnostic>,
    warnings: &mut Vec<Diagnostic>,
) {
    let groups: Vec<&str> = models.iter().map(|(g, _)| g.as_str()).collect();
    for (name, r) in routes {
        if groups.contains(&name.as_str()) {
            diags.push(doc.diag(
                &key(&["routes", name]),
                format!("`{name}` is already a model group; a route needs a name of its own"),
            ));
        }
        if !groups.contains(&&*r.default) {
            diags.push(doc.diag(
                &key(&["routes", name, "default"]),
                unknown_group(&r.default, &groups),
            ));
        }
        let at = |i: usize, field: Option<&str>| {
            let mut p = key(&["routes", name, "rules"]);
            p.push(Seg::Index(i));
            if let Some(f) = field {
                p.push(Seg::Key(f.to_string()));
            }
            p
        };
        for (i, rule) in r.rules.iter().enumerate() {
            if rule.group.is_empty() {
                diags.push(doc.diag(
                    &at(i, Some("group")),
                    "is required: the group this rule sends requests to",
                ));
            } else if !groups.contains(&&*rule.group) {
                diags.push(doc.diag(&at(i, Some("group")), unknown_group(&rule.group, &groups)));
            }
            if let (Some(lo), Some(hi)) = (rule.min_prompt_tokens, rule.max_prompt_tokens)
                && lo > hi
            {
                diags.push(doc.diag(
                    &at(i, Some("max_prompt_tokens")),
                    format!("is below min_prompt_tokens ({lo}): no prompt fits"),
                ));
            }
            let label = |j: usize| r.label(j);
            if let Some(j) = (0..i).find(|&j| r.rules[j].covers(rule)) {
                diags.push(doc.diag(
                    &at(i, None),
                    format!(
                        "can never fire: {} (before it) takes every request it would",
                        label(j)
                    ),
                ));
            } else if let Some(j) =
                (0..i).find(|&j| r.rules[j].group != rule.group && r.rules[j].overlaps(rule))
            {
                warnings.push(doc.diag(
                    &at(i, None),
                    format!(
                        "overlaps {} (before it), which sends some of the same requests to `{}`: the first match wins",
                        label(j),
                        r.rules[j].group
                    ),
                ));
            }
        }
    }
}

/// `[routers.NAME]`: a name of its own, candidates that exist (each once), settings in range.
pub(super) fn routers(
    doc: &Document<'_>,
    routers: &[(String, RouterParams)],
    models: &[(String, ModelGroupConfig)],
    routes: &[(String, RouteParams)],
    diags: &mut Vec<Diagnostic>,
) {
    let groups: Vec<&str> = models.iter().map(|(g, _)| g.as_str()).collect();
    for (name, r) in routers {
        if groups.contains(&name.as_str()) || routes.iter().any(|(n, _)| n == name) {
            diags.push(doc.diag(
                &key(&["routers", name]),
                format!(
                    "`{name}` is already a model group or route; a router needs a name of its own"
                ),
            ));
        }
        let at = |field: &str| key(&["routers", name, field]);
        if r.candidates.is_empty() {
            diags.push(doc.diag(&at("candidates"), "needs at least one model group"));
        }
        let mut seen = HashSet::new();
        for c in &r.candidates {
            if !groups.contains(&c.as_str()) {
                diags.push(doc.diag(&at("candidates"), unknown_group(c, &groups)));
            } else if !seen.insert(c.as_str()) {
                diags.push(doc.diag(&at("candidates"), format!("`{c}` is named twice")));
            }
        }
        for (field, problem) in r.problems() {
            diags.push(doc.diag(&at(field), problem));
        }
    }
}
