//! Warnings for settings that cannot do what they suggest: several deployments that never
//! stand in for each other, fallbacks that can never be taken.

use std::collections::BTreeSet;

use crate::diagnostic::Diagnostic;
use crate::document::{Document, Seg};

use super::{KeyConfig, ModelGroupConfig};

fn key(parts: &[&str]) -> Vec<Seg> {
    parts.iter().map(|p| Seg::Key((*p).to_string())).collect()
}

/// Whether a failed attempt of `m` can ever be tried again.
fn retries(m: &ModelGroupConfig) -> bool {
    m.retry
        .in_force()
        .is_some_and(|r| r.max_attempts > 1 && r.budget > 0.0)
}

/// The (provider, model) pairs a group sends to.
fn targets(m: &ModelGroupConfig) -> BTreeSet<(&str, &str)> {
    m.deployments
        .iter()
        .map(|d| (d.provider.as_str(), d.model.as_str()))
        .collect()
}

/// Adds a warning for each group whose settings defeat each other, and each key that may use
/// a group but none of its fallbacks.
pub(super) fn warn(
    doc: &Document<'_>,
    models: &[(String, ModelGroupConfig)],
    keys: &[(String, KeyConfig)],
    warnings: &mut Vec<Diagnostic>,
) {
    for (group, m) in models {
        if m.deployments.len() > 1 && !retries(m) {
            let why = if m.retry.is_off() {
                "retry = false"
            } else {
                "its retries can never go (max_attempts 1 or budget 0)"
            };
            warnings.push(doc.diag(
                &key(&["models", group, "retry"]),
                format!(
                    "{why}: a request that fails at one of the group's {} deployments is never \
                     tried at another",
                    m.deployments.len()
                ),
            ));
        }
        let own = targets(m);
        for (i, f) in m.fallbacks.iter().enumerate() {
            let Some((_, fm)) = models.iter().find(|(g, _)| g == f) else {
                continue; // an error, reported with the fallbacks
            };
            if !own.is_empty() && targets(fm) == own {
                let mut at = key(&["models", group, "fallbacks"]);
                at.push(Seg::Index(i));
                warnings.push(doc.diag(
                    &at,
                    format!(
                        "`{f}` sends to the same deployments as `{group}`: when they fail, it \
                         fails too"
                    ),
                ));
            }
        }
    }
    for (name, k) in keys {
        if k.spec.models.is_empty() {
            continue;
        }
        for m in &k.spec.models {
            let Some((_, g)) = models.iter().find(|(n, _)| n == m) else {
                continue;
            };
            if !g.fallbacks.is_empty() && !g.fallbacks.iter().any(|f| k.spec.models.contains(f)) {
                warnings.push(doc.diag(
                    &key(&["keys", name, "models"]),
                    format!(
                        "the key may use `{m}` but none of its fallbacks ({}): its requests \
                         never fall back",
                        g.fallbacks.join(", ")
                    ),
                ));
            }
        }
    }
}
