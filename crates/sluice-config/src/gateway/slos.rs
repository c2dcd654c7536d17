//! `[slo.NAME]`: the service-level objectives every finished call is judged by, and what
//! `sluice slo rules` writes alerts for (read into `sluice-telemetry`'s own type, whose
//! checks run here with the names it cannot check); `[diagnose]`: the calls the incident explainer keeps.

use serde::Deserialize;

use crate::diagnostic::Diagnostic;
use crate::document::{Document, Seg};

use super::{LaneParams, ModelGroupConfig};

/// `[diagnose]`: the incident explainer's memory.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
#[serde(default)]
pub struct DiagnoseConfig {
    /// The last calls kept (about 100 bytes each; 0: none, and `/admin/diagnose` is off).
    pub keep: usize,
}

impl Default for DiagnoseConfig {
    fn default() -> Self {
        Self { keep: 20_000 }
    }
}

/// `[slo.NAME]`, read into the type the SLO judge owns.
pub type SloConfig = sluice_telemetry::slo::SloParams;

/// What types cannot check of the SLOs: each kind's fields, ranges, names that must exist.
pub(super) fn check(
    doc: &Document<'_>,
    slos: &[(String, SloConfig)],
    lanes: &[(String, LaneParams)],
    models: &[(String, ModelGroupConfig)],
    diags: &mut Vec<Diagnostic>,
) {
    for (name, s) in slos {
        let at = |field: &str| -> Vec<Seg> {
            ["slo", name.as_str(), field]
                .iter()
                .map(|p| Seg::Key((*p).to_string()))
                .collect()
        };
        for (field, problem) in s.problems() {
            diags.push(doc.diag(&at(field), problem));
        }
        for l in &s.lanes {
            if !lanes.iter().any(|(n, _)| n == l) {
                diags.push(doc.diag(&at("lanes"), format!("names no lane `{l}`")));
            }
        }
        for g in &s.groups {
            if !models.iter().any(|(n, _)| n == g) {
                diags.push(doc.diag(&at("groups"), format!("names no model group `{g}`")));
            }
        }
    }
}
