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
    for (path, problem) in c.semantic.problems() {
        let mut at = key(&["cache", "semantic"]);
        at.extend(path.into_iter().map(Seg::Key));
        diags.push(doc.diag(&at, problem));
    }
}

/// What `[cache.semantic]` names elsewhere: its embeddings upstream (an OpenAI-compatible
/// provider) and its groups (model groups).
pub(crate) fn semantic_refs(
    doc: &Document<'_>,
    s: &SemanticParams,
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
