//! Documents end to end in virtual time, against simulated reviewers with the heavy tail
//! (log-normal first byte, median 800 ms; 1% of calls stall 8 s first): the real gateway and
//! the real analyser, the simulated upstreams in-process, the clock paused. A document's time
//! is the slowest of its reviews, so with 30 reviews about a quarter of documents meet a
//! stall. And a batch of documents at a rate-limited provider beside interactive documents.

use std::sync::Arc;
use std::time::Duration;

use sluice_analysis::{Analyzer, Merger, Options, Progress, Reviewer};
use sluice_gateway::GatewayBuilder;
use sluice_gateway::analyses::WalkReviewer;
use sluice_gateway::walk::Walker;
use sluice_gateway::walk::auth::Identity;
use sluice_rules::Engine;
use sluice_sim::scenario::Scenario;
use tokio::time::Instant;

use super::percentile;

/// The reviewers: two upstreams with the heavy tail (hedges go to the other), verdicts
/// decoded at 40 tokens a second, `hedge` on or off, `rpm` a minute each (0: unlimited).
fn scenario(hedge: bool, rpm: u64) -> anyhow::Result<Scenario> {
    let hedging = if hedge {
        "[gateway.hedge]\nquantile = 0.9\nbudget = 0.15\nmin_samples = 50\n"
    } else {
        ""
    };
    // Providers enforce a minute's limit a second at a time.
    let burst = if rpm > 0 {
        format!("rpm_burst = {}\n", (rpm / 60).max(1))
    } else {
        String::new()
    };
    let upstream = |name: &str| {
        format!(
            "[upstreams.{name}]\nttft_median = \"800ms\"\nttft_sigma = 0.5\nstall_probability = 0.01\n\
             stall = \"8s\"\nper_token = \"25ms\"\noutput_tokens_median = 80\ncapacity = 10000\nrpm = {rpm}\n{burst}"
        )
    };
    let text = format!(
        "[scenario]\nname = \"analysis\"\ndescription = \"clause reviews\"\nseed = 7\nduration = \"1s\"\n\
         [gateway]\nfirst_byte_timeout = \"60s\"\nidle_timeout = \"30s\"\n{hedging}\n{}\n{}\n\
         [models.reviewer]\ndeployments = [\n  {{ provider = \"alpha\", model = \"alpha-review\" }},\n  \
         {{ provider = \"beta\", model = \"beta-review\" }},\n]\n\
         [[traffic]]\nlane = \"interactive\"\nmodel = \"reviewer\"\nrate = 1.0\nprompt_tokens = 100\n",
        upstream("alpha"),
        upstream("beta")
    );
    Scenario::parse(&text).map_err(|e| anyhow::anyhow!("the bench's scenario: {e}"))
}

/// A runtime on this thread with its clock paused: virtual time.
fn paused() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
}

/// A variant of the end-to-end run.
#[derive(Clone, Copy, Debug)]
pub(super) struct Variant {
    pub(super) name: &'static str,
    pub(super) hedge: bool,
    pub(super) merge: bool,
    pub(super) pipeline: bool,
}

/// What a variant's documents took.
pub(super) struct Tail {
    pub(super) name: &'static str,
    pub(super) p50: f64,
    pub(super) p99: f64,
    pub(super) p999: f64,
    pub(super) over_sla: f64,
    pub(super) calls: f64,
    pub(super) flagged: f64,
}

fn analyzer(engine: &Arc<Engine>, v: Variant, deadline: Option<Duration>) -> Analyzer {
    Analyzer::new(
        engine.clone(),
        Options {
            review: true,
            merge: v.merge,
            pipeline: v.pipeline,
            threads: 1,
            deadline,
            model: "reviewer".into(),
            made_by: sluice_analysis::MadeBy::default(),
        },
    )
}

/// `docs` 47-page documents, one every `every`, each analysed alone (its own merger) in the
/// interactive lane; no deadline, so that the tail is seen whole.
pub(super) fn documents(
    engine: &Arc<Engine>,
    v: Variant,
    docs: usize,
    every: Duration,
) -> anyhow::Result<Tail> {
    paused()?.block_on(async {
        let s = scenario(v.hedge, 0)?;
        let rig = sluice_sim::harness::rig(&s, 7, GatewayBuilder::new())?;
        let a = Arc::new(analyzer(engine, v, None));
        let reviewer: Arc<dyn Reviewer> = Arc::new(WalkReviewer::new(
            Walker::new(rig.gateway.clone()),
            Identity::default(),
            0,
        ));
        let mut tasks = Vec::new();
        let start = Instant::now();
        for i in 0..docs {
            tokio::time::sleep_until(start + every * i as u32).await;
            let text = sluice_analysis::synth::contract(i as u64, 47, 0.2).join("\x0c");
            let (a, reviewer) = (a.clone(), reviewer.clone());
            tasks.push(tokio::spawn(async move {
                a.analyze(
                    &format!("doc-{i}.txt"),
                    text.as_bytes(),
                    &reviewer,
                    &Merger::default(),
                )
                .await
            }));
        }
        let mut ms = Vec::new();
        let (mut calls, mut flagged) = (0u64, 0usize);
        for t in tasks {
            let r = t.await??;
            ms.push(r.timings.total_ms);
            calls += r.calls.sent;
            flagged += r.findings.len();
        }
        ms.sort_by(f64::total_cmp);
        let n = ms.len() as f64;
        Ok(Tail {
            name: v.name,
            p50: percentile(&ms, 0.5),
            p99: percentile(&ms, 0.99),
            p999: percentile(&ms, 0.999),
            over_sla: ms.iter().filter(|m| **m > 10_000.0).count() as f64 / n,
            calls: calls as f64 / n,
            flagged: flagged as f64 / n,
        })
    })
}

/// One run of [`batch`]: the interactive documents' times (sorted), when the batch ended,
/// its progress over time, its reviews sent and merged.
type Run = (Vec<f64>, f64, Vec<(f64, String)>, u64, u64);

/// What the batch run saw.
pub(super) struct Batch {
    pub(super) done_s: f64,
    pub(super) progress: Vec<(f64, String)>,
    pub(super) interactive_p50: f64,
    pub(super) interactive_p99: f64,
    pub(super) alone_p50: f64,
    pub(super) alone_p99: f64,
    pub(super) calls: u64,
    pub(super) merged: u64,
}

/// `batch` documents as one batch in the batch lane at a provider allowing `rpm` calls a
/// minute, while an interactive document arrives every `every`; and the same interactive
/// documents with no batch, for comparison.
pub(super) fn batch(
    engine: &Arc<Engine>,
    batch: usize,
    rpm: u64,
    every: Duration,
) -> anyhow::Result<Batch> {
    let v = Variant {
        name: "batch",
        hedge: true,
        merge: true,
        pipeline: true,
    };
    let run = |with_batch: bool, alone: usize| -> anyhow::Result<Run> {
        paused()?.block_on(async {
            let s = scenario(true, rpm / 2)?;
            let rig = sluice_sim::harness::rig(&s, 7, GatewayBuilder::new())?;
            let gw = rig.gateway.clone();
            let lane = gw
                .lanes()
                .iter()
                .position(|l| &*l.name == "batch")
                .unwrap_or(gw.lanes().len() - 1);
            let a = Arc::new(analyzer(engine, v, Some(Duration::from_secs(600))));
            let start = Instant::now();
            let progress = Arc::new(Progress::default());
            let job = with_batch.then(|| {
                let (a, gw, progress) = (a.clone(), gw.clone(), progress.clone());
                let docs: Vec<(String, Vec<u8>)> = (0..batch)
                    .map(|i| {
                        (
                            format!("batch-{i}.txt"),
                            sluice_analysis::synth::contract(10_000 + i as u64, 47, 0.2)
                                .join("\x0c")
                                .into_bytes(),
                        )
                    })
                    .collect();
                tokio::spawn(async move {
                    let reviewer: Arc<dyn Reviewer> = Arc::new(WalkReviewer::new(
                        Walker::new(gw),
                        Identity::default(),
                        lane,
                    ));
                    let (_, summary) = a.analyze_batch(docs, &reviewer, 8, &progress).await;
                    (start.elapsed().as_secs_f64(), summary)
                })
            });
            let interactive: Arc<dyn Reviewer> = Arc::new(WalkReviewer::new(
                Walker::new(gw.clone()),
                Identity::default(),
                0,
            ));
            let mut samples = Vec::new();
            let mut ms = Vec::new();
            let mut i = 0u64;
            // Interactive documents for as long as the batch runs (or as many alone).
            loop {
                let text = sluice_analysis::synth::contract(20_000 + i, 47, 0.2).join("\x0c");
                let r = a
                    .analyze(
                        &format!("live-{i}.txt"),
                        text.as_bytes(),
                        &interactive,
                        &Merger::default(),
                    )
                    .await?;
                ms.push(r.timings.total_ms);
                i += 1;
                samples.push((start.elapsed().as_secs_f64(), progress.line()));
                let running = job.as_ref().is_some_and(|j| !j.is_finished());
                if !running && (with_batch || i as usize >= alone) {
                    break;
                }
                tokio::time::sleep(every).await;
            }
            let (done, calls, merged) = match job {
                Some(j) => {
                    let (done, summary) = j.await?;
                    (done, summary.calls.sent, summary.calls.merged)
                }
                None => (0.0, 0, 0),
            };
            ms.sort_by(f64::total_cmp);
            Ok((ms, done, samples, calls, merged))
        })
    };
    let (with, done_s, progress, calls, merged) = run(true, 0)?;
    let (alone, ..) = run(false, with.len())?;
    Ok(Batch {
        done_s,
        progress,
        interactive_p50: percentile(&with, 0.5),
        interactive_p99: percentile(&with, 0.99),
        alone_p50: percentile(&alone, 0.5),
        alone_p99: percentile(&alone, 0.99),
        calls,
        merged,
    })
}
