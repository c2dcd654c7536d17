//! What an analysis found: a report per document (findings with their clause, rules,
//! severity and the model's verdict, and the document's time by stage), as JSON and as
//! Markdown, and a summary of a batch of them.

use serde::{Deserialize, Serialize};
use sluice_documents::{ClauseKind, Format};
use sluice_rules::Severity;

use crate::review::Verdict;

/// A rule a finding tripped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleRef {
    /// Its id.
    pub id: String,
    /// Its severity.
    pub severity: Severity,
}

/// How a finding's review went.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Review {
    /// The model answered with a verdict.
    Reviewed {
        /// Its verdict.
        verdict: Verdict,
        /// Whether the verdict was given to a near-identical clause (this one sent nothing).
        merged: bool,
    },
    /// The model answered, but not with a verdict that could be read.
    Unparseable {
        /// Why not.
        why: String,
        /// What it answered (at most 500 bytes).
        answer: String,
    },
    /// The call failed.
    Failed {
        /// Why.
        why: String,
    },
    /// The document's deadline came first.
    TimedOut,
    /// Reviews were not asked for.
    NotAsked,
}

/// A clause the rules flagged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// The clause's id.
    pub clause: String,
    /// Its page.
    pub page: usize,
    /// Its number, as written.
    pub number: Option<String>,
    /// Its kind.
    pub kind: ClauseKind,
    /// The rules it tripped.
    pub rules: Vec<RuleRef>,
    /// The highest of their severities.
    pub severity: Severity,
    /// The words the first rule matched.
    pub matched: String,
    /// How its review went.
    pub review: Review,
}

/// A document's time by stage, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    /// Reading the file into pages.
    pub parse_ms: f64,
    /// Cutting pages into clauses.
    pub split_ms: f64,
    /// Running the rules over every clause.
    pub rules_ms: f64,
    /// From the first review asked to the last answered (or the deadline).
    pub reviews_ms: f64,
    /// From the rules' end to the last review's end: what reviews added to the document.
    pub waiting_ms: f64,
    /// From start to report.
    pub total_ms: f64,
}

/// How many reviews a document needed, and what they cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Calls {
    /// Reviews sent.
    pub sent: u64,
    /// Findings whose review was merged into another's (calls saved).
    pub merged: u64,
    /// Reviews that answered a verdict.
    pub answered: u64,
    /// Answers that held no readable verdict.
    pub unparseable: u64,
    /// Reviews that failed.
    pub failed: u64,
    /// Reviews the deadline cut.
    pub timed_out: u64,
    /// Prompt tokens sent.
    pub prompt_tokens: u64,
    /// Of which served from the provider's prompt cache.
    pub cached_tokens: u64,
    /// Answer tokens.
    pub completion_tokens: u64,
}

impl std::ops::AddAssign for Calls {
    fn add_assign(&mut self, c: Self) {
        self.sent += c.sent;
        self.merged += c.merged;
        self.answered += c.answered;
        self.unparseable += c.unparseable;
        self.failed += c.failed;
        self.timed_out += c.timed_out;
        self.prompt_tokens += c.prompt_tokens;
        self.cached_tokens += c.cached_tokens;
        self.completion_tokens += c.completion_tokens;
    }
}

/// One document's analysis.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The rule set and the reviewer behind the report (first, so a reader sees it first;
    /// absent only in reports stored before reports named them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub made_by: Option<crate::MadeBy>,
    /// The document's name.
    pub document: String,
    /// Its format.
    pub format: Format,
    /// Its pages.
    pub pages: usize,
    /// Its text's bytes.
    pub bytes: usize,
    /// Its clauses.
    pub clauses: usize,
    /// What the rules flagged.
    pub findings: Vec<Finding>,
    /// Its reviews.
    pub calls: Calls,
    /// Its time by stage.
    pub timings: Timings,
    /// Whether it met its deadline (no review cut).
    pub on_time: bool,
}

impl Report {
    /// The report as Markdown.
    pub fn markdown(&self) -> String {
        let t = &self.timings;
        let c = &self.calls;
        let mut out = format!(
            "# {}\n\n{}{} pages, {} clauses, {} findings. Time: {:.0} ms (parse {:.0}, split {:.0}, rules {:.0}, reviews {:.0}, waiting for reviews {:.0}){}.\n\nReviews: {} sent, {} merged into another (calls saved), {} answered, {} unreadable, {} failed, {} cut by the deadline.\n\n",
            self.document,
            self.made_by
                .as_ref()
                .map(crate::MadeBy::markdown)
                .unwrap_or_default(),
            self.pages,
            self.clauses,
            self.findings.len(),
            t.total_ms,
            t.parse_ms,
            t.split_ms,
            t.rules_ms,
            t.reviews_ms,
            t.waiting_ms,
            if self.on_time {
                ""
            } else {
                ", past its deadline"
            },
            c.sent,
            c.merged,
            c.answered,
            c.unparseable,
            c.failed,
            c.timed_out,
        );
        if self.findings.is_empty() {
            out.push_str("Nothing flagged.\n");
            return out;
        }
        out.push_str("| clause | page | severity | rules | verdict | quote or reason |\n|---|---|---|---|---|---|\n");
        for f in &self.findings {
            let rules: Vec<&str> = f.rules.iter().map(|r| r.id.as_str()).collect();
            let (verdict, words) = match &f.review {
                Review::Reviewed { verdict, merged } => (
                    format!("{}{}", verdict.risk, if *merged { " (merged)" } else { "" }),
                    format!("\"{}\": {}", verdict.quote, verdict.reason),
                ),
                Review::Unparseable { why, .. } => ("unreadable".into(), why.clone()),
                Review::Failed { why } => ("failed".into(), why.clone()),
                Review::TimedOut => ("past deadline".into(), String::new()),
                Review::NotAsked => ("-".into(), format!("matched \"{}\"", f.matched)),
            };
            out.push_str(&format!(
                "| {} | {} | {:?} | {} | {} | {} |\n",
                f.clause,
                f.page,
                f.severity,
                rules.join(", "),
                verdict,
                cell(&words)
            ));
        }
        out
    }
}

/// Text fit for a Markdown table cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// A document that could not be analysed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refused {
    /// Its name.
    pub document: String,
    /// Why.
    pub error: String,
}

/// A batch's summary.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The rule set and the reviewer behind the batch's reports (none when no document
    /// was analysed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub made_by: Option<crate::MadeBy>,
    /// Documents analysed.
    pub documents: usize,
    /// Documents refused, each with its reason.
    pub refused: Vec<Refused>,
    /// Findings, by severity (low, medium, high, critical).
    pub findings: [usize; 4],
    /// Reviews, summed.
    pub calls: Calls,
    /// Documents that met their deadline.
    pub on_time: usize,
    /// Per-document time: P50, P99 and max, in milliseconds.
    pub total_ms: [f64; 3],
}

impl Summary {
    /// The summary of `reports` and `refused`, made by `made_by`.
    pub fn of(made_by: Option<crate::MadeBy>, reports: &[Report], refused: Vec<Refused>) -> Self {
        let mut s = Self {
            made_by,
            documents: reports.len(),
            refused,
            ..Self::default()
        };
        let mut totals: Vec<f64> = reports.iter().map(|r| r.timings.total_ms).collect();
        totals.sort_by(f64::total_cmp);
        let at = |q: f64| {
            totals
                .get(((totals.len() as f64 * q).ceil() as usize).saturating_sub(1))
                .copied()
                .unwrap_or(0.0)
        };
        s.total_ms = [at(0.5), at(0.99), totals.last().copied().unwrap_or(0.0)];
        for r in reports {
            for f in &r.findings {
                s.findings[f.severity as usize] += 1;
            }
            s.calls += r.calls;
            s.on_time += usize::from(r.on_time);
        }
        s
    }

    /// The summary as Markdown.
    pub fn markdown(&self) -> String {
        let mut out = format!(
            "# Batch summary\n\n{}{} documents analysed, {} refused, {} on time. Per document: P50 {:.0} ms, P99 {:.0} ms, max {:.0} ms.\n\nFindings: {} critical, {} high, {} medium, {} low.\n\nReviews: {} sent, {} merged (calls saved), {} unreadable, {} failed, {} cut by a deadline; {} prompt tokens ({} from the provider's cache), {} answer tokens.\n",
            self.made_by
                .as_ref()
                .map(crate::MadeBy::markdown)
                .unwrap_or_default(),
            self.documents,
            self.refused.len(),
            self.on_time,
            self.total_ms[0],
            self.total_ms[1],
            self.total_ms[2],
            self.findings[3],
            self.findings[2],
            self.findings[1],
            self.findings[0],
            self.calls.sent,
            self.calls.merged,
            self.calls.unparseable,
            self.calls.failed,
            self.calls.timed_out,
            self.calls.prompt_tokens,
            self.calls.cached_tokens,
            self.calls.completion_tokens,
        );
        for r in &self.refused {
            out.push_str(&format!("\n- refused: {}", r.error));
        }
        out
    }
}
