//! The caches' checks: `[cache]`'s values against each other, and what `[cache.semantic]`
//! names elsewhere.

use crate::diagnostic::Diagnostic;
use crate::document::Document;

use super::*;

/// `[cache]`: its values, and the semantic cache's.
pub(crate) fn cache(doc: &Document<'_>, c: &CacheConfig, diags: &mut Vec<Diagnostic>) {
    if c.ttl.is_zero() {
        diags.push(doc.diag(&key(&["cache", "ttl"]), "must be longer than zero"));
    }
    if c.max_bytes < 1024 {
        diags.push(doc.diag(&key(&["cache", "max_bytes"]), "must be at least 1024"));
    }
    let s = &c.semantic;
    let at = |field: &str| key(&["cache", "semantic", field]);
    let threshold = |t: f64, at: &[Seg], diags: &mut Vec<Diagnostic>| {
        if !(t > 0.0 && t <= 1.0) {
            diags.push(doc.diag(at, format!("must be above 0 and at most 1 (is {t})")));
        }
    };
    let max_error = |e: f64, at: &[Seg], diags: &mut Vec<Diagnostic>| {
        if !(e > 0.0 && e < 1.0) {
            diags.push(doc.diag(at, format!("must be above 0 and below 1 (is {e})")));
        }
    };
    threshold(s.threshold, &at("threshold"), diags);
    if !(0.0..=1.0).contains(&s.verify_share) {
        diags.push(doc.diag(&at("verify_share"), "must be from 0 to 1"));
    }
    max_error(s.max_error, &at("max_error"), diags);
    let budget = |b: f64, at: &[Seg], diags: &mut Vec<Diagnostic>| {
        if !(b > 0.0 && b <= 1.0) {
            diags.push(doc.diag(
                at,
                format!("must be above 0 (nothing could be learnt) and at most 1 (is {b})"),
            ));
        }
    };
    budget(s.verify_budget, &at("verify_budget"), diags);
    for (name, g) in &s.groups {
        let at = |field: &str| key(&["cache", "semantic", "groups", name, field]);
        if let Some(t) = g.threshold {
            threshold(t, &at("threshold"), diags);
        }
        if let Some(e) = g.max_error {
            max_error(e, &at("max_error"), diags);
        }
        if let Some(b) = g.verify_budget {
            budget(b, &at("verify_budget"), diags);
        }
    }
    if let Some(e) = &s.embeddings {
        let at = |field: &str| key(&["cache", "semantic", "embeddings", field]);
        if e.model.trim().is_empty() {
            diags.push(doc.diag(&at("model"), "must name the embedding model"));
        }
        if e.timeout.is_zero() {
            diags.push(doc.diag(&at("timeout"), "must be longer than zero"));
        }
        if e.dimensions == Some(0) {
            diags.push(doc.diag(&at("dimensions"), "must be at least 1"));
        }
    }
    if !(0.0..1.0).contains(&s.min_similarity) {
        diags.push(doc.diag(&at("min_similarity"), "must be from 0 to below 1"));
    }
    if !(s.temperature_ceiling >= 0.0 && s.temperature_ceiling.is_finite()) {
        diags.push(doc.diag(&at("temperature_ceiling"), "must be 0 or more"));
    }
    if s.ttl.is_zero() {
        diags.push(doc.diag(&at("ttl"), "must be longer than zero"));
    }
    if s.max_question_chars == 0 {
        diags.push(doc.diag(&at("max_question_chars"), "must be at least 1"));
    }
    if s.max_bytes < 1024 {
        diags.push(doc.diag(&at("max_bytes"), "must be at least 1024"));
    }
    if s.enabled && s.embeddings.is_none() && s.model.trim().is_empty() {
        diags.push(doc.diag(&at("model"), "must name the embedding model's folder"));
    }
}

/// What `[cache.semantic]` names elsewhere: its embeddings upstream (an OpenAI-compatible
/// provider) and its groups (model groups).
pub(crate) fn semantic_refs(
    doc: &Document<'_>,
    s: &SemanticCacheConfig,
    providers: &[(String, ProviderConfig)],
    models: &[(String, ModelGroupConfig)],
    diags: &mut Vec<Diagnostic>,
) {
    if let Some(e) = &s.embeddings {
        let at = key(&["cache", "semantic", "embeddings", "provider"]);
        match providers.iter().find(|(n, _)| *n == e.provider) {
            None => diags.push(doc.diag(&at, format!("`{}` is not in [providers]", e.provider))),
            Some((_, p)) if p.kind() != sluice_providers::ProviderKind::Openai => {
                diags.push(doc.diag(
                    &at,
                    format!(
                        "`{}` is not OpenAI-compatible (kind = \"openai\")",
                        e.provider
                    ),
                ))
            }
            Some(_) => {}
        }
    }
    for name in s.groups.keys() {
        if !models.iter().any(|(m, _)| m == name) {
            diags.push(doc.diag(
                &key(&["cache", "semantic", "groups", name]),
                format!("`{name}` is not a model group in [models]"),
            ));
        }
    }
}

/// `[prefixes]`: the share of requests the prefix watch samples.
pub(crate) fn prefixes(doc: &Document<'_>, p: &PrefixesConfig, diags: &mut Vec<Diagnostic>) {
    if !(0.0..=1.0).contains(&p.watch) {
        diags.push(doc.diag(&key(&["prefixes", "watch"]), "must be from 0 to 1"));
    }
}
