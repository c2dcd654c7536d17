//! `[analysis]`: document analysis (`POST /v1/analyses`, `sluice analyze`): which rules,
//! which model reviews what they flag, and each document's deadline.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::diagnostic::Diagnostic;
use crate::document::{Document, Seg};

/// `[analysis]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
#[serde(default)]
pub struct AnalysisConfig {
    /// Whether `/v1/analyses` is served.
    pub enabled: bool,
    /// A rule file (TOML `[[rule]]` tables), relative to the configuration's folder; the
    /// shipped contract-risk rules when unset.
    pub rules: Option<PathBuf>,
    /// Whether the clauses the rules flag are reviewed by a model (else the rules' findings
    /// alone).
    pub review: bool,
    /// The model (group, route or router) reviews ask for; the first `[models.*]` when unset.
    pub model: Option<String>,
    /// Each document's deadline: reviews not answered by then are reported as cut.
    #[serde(with = "humantime_serde")]
    pub deadline: Duration,
    /// Whether near-identical clauses share one review.
    pub merge: bool,
    /// Whether reviews start as each page is ruled.
    pub pipeline: bool,
    /// Threads the rules run on, per document.
    pub threads: u32,
    /// The lane a batch of documents' reviews wait in (default `batch`, else the last lane);
    /// a single document's reviews go in its caller's lane.
    pub lane: Option<String>,
    /// Documents analysed at once in a batch.
    pub concurrency: u32,
    /// The most documents one request may upload.
    pub max_documents: u32,
    /// The largest upload, in bytes (all its documents together).
    pub max_upload_bytes: u64,
}

impl Default for AnalysisConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            rules: None,
            review: true,
            model: None,
            deadline: Duration::from_secs(10),
            merge: true,
            pipeline: true,
            threads: 1,
            lane: None,
            concurrency: 8,
            max_documents: 500,
            max_upload_bytes: 64 << 20,
        }
    }
}

/// What types cannot check of `[analysis]`: lanes and models that exist, sizes above zero.
pub(super) fn check(
    doc: &Document<'_>,
    a: &AnalysisConfig,
    lanes: &[String],
    models: &[&str],
    diags: &mut Vec<Diagnostic>,
) {
    let at = |field: &str| [Seg::Key("analysis".into()), Seg::Key(field.into())];
    if let Some(lane) = &a.lane
        && !lanes.contains(lane)
    {
        diags.push(doc.diag(
            &at("lane"),
            format!("no lane `{lane}`; lanes: {}", lanes.join(", ")),
        ));
    }
    if let Some(model) = &a.model
        && !models.contains(&model.as_str())
    {
        diags.push(doc.diag(
            &at("model"),
            format!(
                "no model, route or router `{model}`; there are: {}",
                models.join(", ")
            ),
        ));
    }
    for (field, zero) in [
        ("threads", a.threads == 0),
        ("concurrency", a.concurrency == 0),
        ("max_documents", a.max_documents == 0),
        ("max_upload_bytes", a.max_upload_bytes == 0),
        ("deadline", a.deadline.is_zero()),
    ] {
        if zero {
            diags.push(doc.diag(&at(field), format!("{field} must be above zero")));
        }
    }
}

/// Warnings for what `[analysis]` suggests and the batch store cannot do: a batch of
/// documents is a batch job, so without the store (`batches` `None`: the ledger off) or with
/// batch jobs off only single documents are served, and an upload whose batch file (base64,
/// a third larger) passes `[batches] max_file_bytes` is refused whatever `max_upload_bytes`
/// says.
pub(super) fn batched(
    doc: &Document<'_>,
    a: &AnalysisConfig,
    batches: Option<&crate::gateway::BatchesConfig>,
    warnings: &mut Vec<Diagnostic>,
) {
    if !a.enabled {
        return;
    }
    let at = |field: Option<&str>| {
        let mut p = vec![Seg::Key("analysis".into())];
        p.extend(field.map(|f| Seg::Key(f.into())));
        p
    };
    match batches {
        Some(b) if b.enabled => {
            let as_file = a.max_upload_bytes.saturating_add(2) / 3 * 4;
            if as_file > b.max_file_bytes {
                warnings.push(doc.diag(
                    &at(Some("max_upload_bytes")),
                    format!(
                        "an upload of {} bytes is about {as_file} bytes as a batch file \
                         (base64), over [batches] max_file_bytes = {}: uploads past that \
                         are refused",
                        a.max_upload_bytes, b.max_file_bytes
                    ),
                ));
            }
        }
        _ => warnings.push(doc.diag(
            &at(None),
            "a batch of documents is a batch job, kept in the batch store: with [ledger] \
             store = \"off\" or [batches] enabled = false, POST /v1/analyses takes one \
             document at a time",
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use crate::gateway::{Secrets, check};

    #[test]
    fn analysis_names_models_and_lanes_that_exist() {
        let base = "[models.m]\ndeployments = [{ provider = \"sim\", model = \"a\" }]\n";
        let env = BTreeMap::new();
        let ok = check(base, &env, &["sim"], Secrets::Required)
            .config
            .unwrap();
        assert!(ok.analysis.enabled && ok.analysis.review);
        assert_eq!(ok.analysis.deadline, std::time::Duration::from_secs(10));
        let bad = format!(
            "{base}[analysis]\nmodel = \"gpt-5\"\nlane = \"bulk\"\nthreads = 0\ndeadline = \"0s\"\n"
        );
        let c = check(&bad, &env, &["sim"], Secrets::Required);
        let text = c.errors.to_string();
        for want in [
            "analysis.model",
            "no model, route or router `gpt-5`; there are: m",
            "analysis.lane",
            "analysis.threads",
            "analysis.deadline",
        ] {
            assert!(text.contains(want), "{want}: {text}");
        }
    }

    #[test]
    fn analysis_warns_when_the_batch_store_cannot_hold_its_batches() {
        let base = "[models.m]\ndeployments = [{ provider = \"sim\", model = \"a\" }]\n";
        let env = BTreeMap::new();
        let warned = |text: &str| {
            check(text, &env, &["sim"], Secrets::Required)
                .warnings
                .iter()
                .map(|w| format!("{}: {}", w.path, w.message))
                .filter(|w| w.starts_with("analysis"))
                .collect::<Vec<_>>()
        };
        assert!(warned(base).is_empty(), "the defaults fit");
        let off = warned(&format!("{base}[ledger]\nstore = \"off\"\n"));
        assert!(off[0].contains("one document at a time"), "{off:?}");
        let no_batches = warned(&format!("{base}[batches]\nenabled = false\n"));
        assert!(
            no_batches[0].contains("one document at a time"),
            "{no_batches:?}"
        );
        let big = warned(&format!(
            "{base}[analysis]\nmax_upload_bytes = 90000000\n[batches]\nmax_file_bytes = 100000000\n"
        ));
        assert!(
            big[0].starts_with("analysis.max_upload_bytes") && big[0].contains("120000000"),
            "{big:?}"
        );
    }
}
