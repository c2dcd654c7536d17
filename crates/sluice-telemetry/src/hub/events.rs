//! Events counted as they happen, outside a call's record: the semantic cache's lookups and
//! checks, routers' feedback, prompt shaping, SLO verdicts, prefix churn.

use std::sync::Arc;

use super::Telemetry;
use crate::metrics::GroupLabels;

impl Telemetry {
    /// Counts a semantic-cache lookup in `group`.
    pub fn semantic(&self, group: &str, what: &sluice_core::SemanticLookup) {
        use sluice_core::SemanticLookup as L;
        let (result, why) = match what {
            L::Hit { .. } => ("hit", ""),
            L::Miss {
                refused: Some(why), ..
            } => ("refused", *why),
            L::Miss { .. } => ("miss", ""),
            L::Verify { .. } => ("verify", ""),
            L::Unverified { .. } => ("unverified", "verify_budget"),
            L::Ineligible(why) => ("ineligible", *why),
        };
        self.metrics
            .semantic
            .get_or_create(&crate::metrics::SemanticLabels {
                group: Arc::from(group),
                result,
                why,
            })
            .inc();
    }

    /// Counts a semantic entry's answer checked against the upstream's in `group`.
    pub fn semantic_verified(&self, group: &str, agreed: bool) {
        self.metrics
            .semantic_verifications
            .get_or_create(&crate::metrics::SemanticLabels {
                group: Arc::from(group),
                result: if agreed { "agreed" } else { "differed" },
                why: "",
            })
            .inc();
    }

    /// Counts money the semantic cache saved (`saved`: a hit's answer at what it cost when
    /// bought) or spent verifying (`verification`) in `group`, in micro-units.
    pub fn semantic_micros(&self, group: &str, result: &'static str, micros: u64) {
        self.metrics
            .semantic_micros
            .get_or_create(&crate::metrics::SemanticLabels {
                group: Arc::from(group),
                result,
                why: "",
            })
            .inc_by(micros);
    }

    /// Counts feedback on a semantic hit: the client found it right, or wrong (a measured
    /// error).
    pub fn semantic_reported(&self, group: &Arc<str>, right: bool) {
        self.metrics
            .semantic_verifications
            .get_or_create(&crate::metrics::SemanticLabels {
                group: group.clone(),
                result: if right {
                    "reported_right"
                } else {
                    "reported_wrong"
                },
                why: "",
            })
            .inc();
    }

    /// Counts a score an automatic router learnt from.
    pub fn router_feedback(&self, route: &Arc<str>, signal: &'static str) {
        self.metrics
            .router_feedback
            .get_or_create(&crate::metrics::FeedbackLabels {
                route: route.clone(),
                signal,
            })
            .inc();
    }

    /// Counts a request whose normalisation failed (it went as it came).
    pub fn normalise_failed(&self, group: &Arc<str>) {
        self.metrics
            .normalise_failures
            .get_or_create(&GroupLabels {
                group: group.clone(),
            })
            .inc();
    }

    /// Counts what compression or progressive loading (`stage`) did with a request of
    /// `group` (`kind`), and its prompt tokens before and as sent when it shaped it.
    pub fn context_shaped(
        &self,
        group: &Arc<str>,
        stage: &'static str,
        kind: &'static str,
        tokens: Option<(u64, u64)>,
    ) {
        let c = &self.metrics.context;
        let labels = |kind| crate::context::ShapingLabels {
            group: group.clone(),
            stage,
            kind,
        };
        c.requests.get_or_create(&labels(kind)).inc();
        if let Some((before, after)) = tokens {
            c.tokens.get_or_create(&labels("before")).inc_by(before);
            c.tokens.get_or_create(&labels("after")).inc_by(after);
        }
    }

    /// Counts one event of SLO `slo`.
    pub fn slo_event(&self, slo: &Arc<str>, verdict: crate::slo::Verdict) {
        let (outcome, culprit) = match verdict {
            crate::slo::Verdict::Good => ("good", "none"),
            crate::slo::Verdict::Bad(c) => ("bad", c.label()),
        };
        self.metrics
            .context
            .slo_events
            .get_or_create(&crate::context::SloLabels {
                slo: slo.clone(),
                outcome,
                culprit,
            })
            .inc();
    }

    /// Counts the calls progressive loading made for one request of `group`.
    pub fn context_rounds(&self, group: &Arc<str>, rounds: u64) {
        self.metrics
            .context
            .rounds
            .get_or_create(&crate::context::ShapingLabels {
                group: group.clone(),
                stage: "progressive",
                kind: "round",
            })
            .inc_by(rounds);
    }

    /// Counts a sampled request that did not share its prefix, and why.
    pub fn prefix_churn(&self, tenant: &str, group: &str, cause: &'static str) {
        self.metrics
            .prefix_churn
            .get_or_create(&crate::metrics::ChurnLabels {
                tenant: self.tenant_label(Some(tenant)),
                group: Arc::from(group),
                cause,
            })
            .inc();
    }
}
