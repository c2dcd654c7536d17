//! Document analysis, end to end: a file read into pages, cut into clauses, the clauses
//! ruled, the flagged ones reviewed by a model, and a report. What this crate decides:
//!
//! - which clauses are reviewed (those the rules flag), and which share a review
//!   ([`merge`]: near-identical clauses, within a document and across a batch);
//! - the order of work ([`Analyzer::analyze`]): with `pipeline`, each page's clauses are ruled
//!   and their reviews sent before the next page is ruled, so the model works while the
//!   rules read on; without it, every review waits for the last page;
//! - each review's request ([`review`]: a stable, cacheable prefix, then the clause) and how
//!   its answer is read (a structured verdict, or "unreadable" with the answer kept);
//! - the document's deadline: reviews not answered by then are reported as cut, and the
//!   report comes at the deadline with what the rules found;
//! - the report ([`report`]: findings, calls, time by stage) and a batch's summary.
//!
//! Who reviews is a [`Reviewer`]: the gateway's own walk in `sluice analyze` and
//! `POST /v1/analyses`, so that reviews are admitted, routed, cached, hedged and billed as
//! any other call.

pub mod made_by;
pub mod merge;
pub mod report;
pub mod review;
pub mod synth;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::FutureExt;
use futures::future::join_all;
use sluice_documents::{ReadError, read, split};
use sluice_rules::{Engine, Hit, RuleSpec, Severity};
use tokio::time::Instant;

pub use made_by::{MadeBy, ReviewedBy, RuleSet};
pub use merge::Merger;
pub use report::{Calls, Finding, Refused, Report, Review, RuleRef, Summary, Timings};
pub use review::{Prompt, ReviewCall, ReviewFailed, Reviewed, Reviewer, Verdict};

/// How documents are analysed.
#[derive(Clone, Debug)]
pub struct Options {
    /// Whether flagged clauses are reviewed by the model (else the rules' findings alone).
    pub review: bool,
    /// Whether near-identical clauses share one review.
    pub merge: bool,
    /// Whether reviews start as each page is ruled (else after the last page).
    pub pipeline: bool,
    /// Threads the rules run on.
    pub threads: usize,
    /// Each document's deadline, from its start.
    pub deadline: Option<Duration>,
    /// The model reviews ask for.
    pub model: String,
    /// The rule set and the reviewer every report names (the reviewer left out of reports
    /// when `review` is off).
    pub made_by: MadeBy,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            review: true,
            merge: true,
            pipeline: true,
            threads: 1,
            deadline: Some(Duration::from_secs(10)),
            model: "gpt-4o-mini".into(),
            made_by: MadeBy::default(),
        }
    }
}

/// Where a batch stands: documents queued, being analysed, done and refused.
#[derive(Debug, Default)]
pub struct Progress {
    /// Documents in the batch.
    pub total: AtomicUsize,
    /// Documents analysed, or refused.
    pub done: AtomicUsize,
    /// Documents being analysed now.
    pub running: AtomicUsize,
    /// Documents refused.
    pub refused: AtomicUsize,
}

impl Progress {
    /// `queued Q/T` (not yet started), `running`, `done`: what a caller polls.
    pub fn line(&self) -> String {
        let total = self.total.load(Ordering::Relaxed);
        let done = self.done.load(Ordering::Relaxed);
        let running = self.running.load(Ordering::Relaxed);
        let queued = total.saturating_sub(done + running);
        format!("queued {queued}/{total}, running {running}, done {done}/{total}")
    }
}

/// Analyses documents with one rule set.
#[derive(Debug)]
pub struct Analyzer {
    engine: Arc<Engine>,
    prompt: Prompt,
    options: Options,
}

/// A flagged clause whose review is on its way.
struct Asked {
    finding: usize,
    pending: Option<merge::Pending>,
    merged: bool,
}

impl Analyzer {
    /// An analyser of `engine`'s rules.
    pub fn new(engine: Arc<Engine>, options: Options) -> Self {
        let prompt = Prompt::new(engine.rules(), &options.model);
        Self {
            engine,
            prompt,
            options,
        }
    }

    /// Its rules.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Its options.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Its reviews' stable prefix.
    pub fn prompt(&self) -> &Prompt {
        &self.prompt
    }

    /// Analyses file `name` (`bytes`), its reviews sent to `reviewer` and merged through
    /// `merger`. A file that cannot be read is refused with why.
    pub async fn analyze(
        &self,
        name: &str,
        bytes: &[u8],
        reviewer: &Arc<dyn Reviewer>,
        merger: &Merger,
    ) -> Result<Report, ReadError> {
        let start = Instant::now();
        let deadline = self.options.deadline.map(|d| start + d);
        let doc = read(name, bytes)?;
        let parsed = Instant::now();
        let clauses = split(&doc);
        let cut = Instant::now();
        let mut findings = Vec::new();
        let mut asked = Vec::new();
        let mut calls = Calls::default();
        let mut rules_time = Duration::ZERO;
        let mut first_ask = None;
        let mut from = 0;
        while from < clauses.len() {
            // A page at a time when pipelined, else all at once.
            let page = clauses[from].page;
            let to = if self.options.pipeline {
                from + clauses[from..]
                    .iter()
                    .take_while(|c| c.page == page)
                    .count()
            } else {
                clauses.len()
            };
            let t = Instant::now();
            let part: Vec<sluice_rules::Clause<'_>> = clauses[from..to]
                .iter()
                .map(|c| sluice_rules::Clause {
                    kind: c.kind.as_str(),
                    text: &c.text,
                })
                .collect();
            let hits = self.engine.rule_all(&part, self.options.threads);
            rules_time += t.elapsed();
            for (clause, hits) in clauses[from..to].iter().zip(hits) {
                if hits.is_empty() {
                    continue;
                }
                findings.push(self.finding(clause, &hits));
                if !self.options.review {
                    continue;
                }
                first_ask.get_or_insert_with(Instant::now);
                let rules: Vec<&RuleSpec> =
                    hits.iter().map(|h| &self.engine.rules()[h.rule]).collect();
                let ids: Vec<usize> = hits.iter().map(|h| h.rule).collect();
                let call = ReviewCall {
                    body: self.prompt.request(&clause.id, &clause.text, &rules),
                    timeout: deadline.map(|d| d.saturating_duration_since(Instant::now())),
                    id: clause.id.clone(),
                };
                let ask = || {
                    let reviewer = reviewer.clone();
                    let task = tokio::spawn(async move { reviewer.review(call).await });
                    async move {
                        task.await
                            .unwrap_or_else(|e| Err(ReviewFailed(format!("the review ended: {e}"))))
                    }
                    .boxed()
                };
                let (pending, merged) = if self.options.merge {
                    let f = &findings[findings.len() - 1];
                    let kind = merge::Kind::of(&doc.name, f.kind, &f.matched, &clause.text);
                    merger.review(&ids, merge::Shape::of_kind(&clause.text, kind), ask)
                } else {
                    (ask().shared(), false)
                };
                if merged {
                    calls.merged += 1;
                } else {
                    calls.sent += 1;
                }
                asked.push(Asked {
                    finding: findings.len() - 1,
                    pending: Some(pending),
                    merged,
                });
            }
            from = to;
            // Let the reviews just asked for leave before the next page is ruled.
            tokio::task::yield_now().await;
        }
        let ruled = Instant::now();
        let ends = self
            .collect(&mut asked, &mut findings, &mut calls, deadline)
            .await;
        let last = ends.unwrap_or(ruled);
        let end = Instant::now();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let timings = Timings {
            parse_ms: ms(parsed - start),
            split_ms: ms(cut - parsed),
            rules_ms: ms(rules_time),
            reviews_ms: first_ask.map_or(0.0, |f| ms(last.saturating_duration_since(f))),
            waiting_ms: ms(last.saturating_duration_since(ruled)),
            total_ms: ms(end - start),
        };
        Ok(Report {
            made_by: Some(self.made_by()),
            document: doc.name.clone(),
            format: doc.format,
            pages: doc.pages.len(),
            bytes: doc.bytes(),
            clauses: clauses.len(),
            findings,
            on_time: calls.timed_out == 0,
            calls,
            timings,
        })
    }

    /// What made this analyser's reports: its rules, and its reviewer when it reviews.
    pub fn made_by(&self) -> MadeBy {
        let mut m = self.options.made_by.clone();
        if !self.options.review {
            m.reviewer = None;
        }
        m
    }

    /// The finding of `clause`, which tripped `hits`.
    fn finding(&self, clause: &sluice_documents::Clause, hits: &[Hit]) -> Finding {
        let rules: Vec<RuleRef> = hits
            .iter()
            .map(|h| {
                let r = &self.engine.rules()[h.rule];
                RuleRef {
                    id: r.id.clone(),
                    severity: r.severity,
                }
            })
            .collect();
        let severity = rules
            .iter()
            .map(|r| r.severity)
            .max()
            .unwrap_or(Severity::Low);
        let matched = hits
            .first()
            .and_then(|h| clause.text.get(h.start..h.end))
            .unwrap_or_default()
            .to_string();
        Finding {
            clause: clause.id.clone(),
            page: clause.page,
            number: clause.number.clone(),
            kind: clause.kind,
            rules,
            severity,
            matched,
            review: Review::NotAsked,
        }
    }

    /// Waits for every review asked, until `deadline`; fills in each finding's review and
    /// the calls' counts, and says when the last review ended.
    async fn collect(
        &self,
        asked: &mut [Asked],
        findings: &mut [Finding],
        calls: &mut Calls,
        deadline: Option<Instant>,
    ) -> Option<Instant> {
        let waits = asked.iter_mut().map(|a| {
            let pending = a.pending.take();
            async move {
                let Some(pending) = pending else {
                    return (None, Instant::now());
                };
                let got = match deadline {
                    Some(d) => tokio::time::timeout_at(d, pending).await.ok(),
                    None => Some(pending.await),
                };
                (got, Instant::now())
            }
        });
        let results = join_all(waits).await;
        let mut last = None;
        for (a, (got, at)) in asked.iter().zip(results) {
            let f = &mut findings[a.finding];
            f.review = match got {
                None => {
                    calls.timed_out += 1;
                    Review::TimedOut
                }
                Some(Err(e)) => {
                    calls.failed += 1;
                    last = last.max(Some(at));
                    Review::Failed { why: e.0 }
                }
                Some(Ok(r)) => {
                    last = last.max(Some(at));
                    if !a.merged {
                        calls.prompt_tokens += r.prompt_tokens;
                        calls.cached_tokens += r.cached_tokens;
                        calls.completion_tokens += r.completion_tokens;
                    }
                    match review::verdict(&r.content) {
                        Ok(verdict) => {
                            calls.answered += 1;
                            Review::Reviewed {
                                verdict,
                                merged: a.merged,
                            }
                        }
                        Err(why) => {
                            calls.unparseable += 1;
                            let mut answer = r.content.clone();
                            let mut cut = answer.len().min(500);
                            while !answer.is_char_boundary(cut) {
                                cut -= 1;
                            }
                            answer.truncate(cut);
                            Review::Unparseable { why, answer }
                        }
                    }
                }
            };
        }
        if calls.timed_out > 0 {
            last = deadline;
        }
        last
    }

    /// Analyses every document of `docs` (name and bytes), `concurrency` at a time, with
    /// one merger for the batch; `progress` follows it.
    pub async fn analyze_batch(
        &self,
        docs: Vec<(String, Vec<u8>)>,
        reviewer: &Arc<dyn Reviewer>,
        concurrency: usize,
        progress: &Progress,
    ) -> (Vec<Report>, Summary) {
        use futures::StreamExt;
        let merger = Merger::default();
        progress.total.store(docs.len(), Ordering::Relaxed);
        let results: Vec<_> = futures::stream::iter(docs)
            .map(|(name, bytes)| {
                let merger = &merger;
                async move {
                    progress.running.fetch_add(1, Ordering::Relaxed);
                    let r = self.analyze(&name, &bytes, reviewer, merger).await;
                    progress.running.fetch_sub(1, Ordering::Relaxed);
                    progress.done.fetch_add(1, Ordering::Relaxed);
                    if r.is_err() {
                        progress.refused.fetch_add(1, Ordering::Relaxed);
                    }
                    (name, r)
                }
            })
            .buffered(concurrency.max(1))
            .collect()
            .await;
        let mut reports = Vec::new();
        let mut refused = Vec::new();
        for (name, r) in results {
            match r {
                Ok(r) => reports.push(r),
                Err(e) => refused.push(Refused {
                    document: name,
                    error: e.to_string(),
                }),
            }
        }
        let summary = Summary::of(Some(self.made_by()), &reports, refused);
        (reports, summary)
    }
}
