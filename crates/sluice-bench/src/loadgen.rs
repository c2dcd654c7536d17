//! `sluice bench loadgen`: shows the load generator sustains its target rate against the
//! simulator (in its own process) on loopback, so it is never the bottleneck of a measurement.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use serde::Serialize;
use sluice_sim::load::{Traffic, Workload};

use sluice_cli::write_json;

use crate::child::{Child, free_port};
use crate::load::run_load;

/// Options of the generator-capacity benchmark.
#[derive(Args, Debug, Clone)]
pub struct LoadgenArgs {
    /// Target rate, requests per second.
    #[arg(long, default_value_t = 10_000.0)]
    pub rate: f64,
    /// How long to send.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub duration: Duration,
    /// Write the results as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Serialize)]
struct Results {
    target_rate: f64,
    achieved_rate: f64,
    requests: u64,
    ok: u64,
    p50_ms: f64,
    p99_ms: f64,
    p999_ms: f64,
}

/// Runs the benchmark.
pub fn run(a: &LoadgenArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let port = free_port()?;
        let config = format!(
            "[sim]\nlisten = \"127.0.0.1:{port}\"\n\n[upstreams.fixed]\nttft_median = \"1ms\"\nttft_sigma = 0.0\nper_token = \"0ms\"\noutput_tokens_median = 1\noutput_tokens_sigma = 0.0\nprompt_cache = {{ enabled = false }}\n"
        );
        let _sim = Child::spawn("sim", &config, &format!("http://127.0.0.1:{port}/healthz"), None).await?;
        let uri: http::Uri = format!("http://127.0.0.1:{port}/fixed/v1/chat/completions").parse()?;
        let t = Traffic {
            lane: "loadgen".into(),
            model: "fixed".into(),
            rate: a.rate,
            prompt_tokens: 50,
            stream: false,
            ..Traffic::default()
        };
        let warm = Workload::build(&[Traffic { rate: a.rate.min(1000.0), ..t.clone() }], &[], Duration::from_secs(1), 7);
        let _ = run_load(uri.clone(), &warm, None, "warm").await?;
        let w = Workload::build(&[t], &[], a.duration, 1);
        let s = run_load(uri, &w, None, "loadgen").await?;
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let r = Results {
            target_rate: a.rate,
            achieved_rate: s.achieved_rate,
            requests: s.all.count,
            ok: s.all.ok,
            p50_ms: ms(s.all.total.p50),
            p99_ms: ms(s.all.total.p99),
            p999_ms: ms(s.all.total.p999),
        };
        println!(
            "load generator: target {:.0}/s, achieved {:.0}/s; {} of {} ok; latency from schedule P50 {:.2} ms, P99 {:.2} ms, P999 {:.2} ms",
            r.target_rate, r.achieved_rate, r.ok, r.requests, r.p50_ms, r.p99_ms, r.p999_ms
        );
        println!("(latency counts from each request's scheduled time, so a generator falling behind shows up here)");
        write_json(a.json.as_deref(), &r)?;
        Ok(ExitCode::SUCCESS)
    })
}
