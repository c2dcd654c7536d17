//! `sluice bench`: the open-loop load generator against any URL, plus the two benchmarks
//! that keep sluice honest: the gateway's added latency, and the generator's own capacity.

use std::path::PathBuf;

use sluice_cli::write_json;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use parking_lot::Mutex;
use sluice_sim::load::record::table;
use sluice_sim::load::{HttpTarget, Progress, Recorder, Summary, Traffic, Workload, drive};

/// Options of the load generator.
#[derive(Args, Debug, Clone)]
pub struct LoadArgs {
    /// Base URL of the server (`/v1/chat/completions` is added when no path is given).
    #[arg(long)]
    pub target: Option<String>,
    /// Requests per second (Poisson arrivals).
    #[arg(long, default_value_t = 50.0)]
    pub rate: f64,
    /// How long to send.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub duration: Duration,
    /// Stop after this many requests instead (overrides --duration).
    #[arg(long)]
    pub count: Option<u64>,
    /// The model group to ask for.
    #[arg(long, default_value = "chat")]
    pub model: String,
    /// Prompt size in tokens.
    #[arg(long, default_value_t = 500)]
    pub prompt_tokens: u32,
    /// Leading prompt tokens shared by every request.
    #[arg(long, default_value_t = 0)]
    pub shared_prefix_tokens: u32,
    /// Ask for streams.
    #[arg(long)]
    pub stream: bool,
    /// `max_tokens` for each request.
    #[arg(long)]
    pub max_tokens: Option<u32>,
    /// Lane mix sent as `x-sluice-lane`, e.g. `interactive=0.8,batch=0.2`.
    #[arg(long, default_value = "interactive=1")]
    pub lanes: String,
    /// Tenant mix sent as `x-sluice-tenant`, e.g. `acme=0.5,globex=0.5`.
    #[arg(long)]
    pub tenants: Option<String>,
    /// Give each request this deadline (sent as `x-sluice-timeout-ms`).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub timeout: Option<Duration>,
    /// Count requests slower than this as SLO breaches.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub slo: Option<Duration>,
    /// Seed of the arrival times.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write the summary as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// An API key, sent as `Authorization: Bearer KEY` (or read from `SLUICE_API_KEY`).
    #[arg(long, env = "SLUICE_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// A header every request carries, `Name: value`; may be given more than once.
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
}

/// The headers `--api-key` and `--header` ask for.
pub fn headers(a: &LoadArgs) -> anyhow::Result<Vec<(http::HeaderName, http::HeaderValue)>> {
    let mut out = Vec::new();
    if let Some(key) = &a.api_key {
        let value = http::HeaderValue::from_str(&format!("Bearer {}", key.trim()))
            .context("--api-key holds characters a header cannot")?;
        out.push((http::header::AUTHORIZATION, value));
    }
    for h in &a.headers {
        let (name, value) = h
            .split_once(':')
            .with_context(|| format!("--header `{h}`: write it as `Name: value`"))?;
        let name = http::HeaderName::from_bytes(name.trim().as_bytes())
            .with_context(|| format!("--header `{h}`: `{}` is not a header name", name.trim()))?;
        let value = http::HeaderValue::from_str(value.trim()).with_context(|| {
            format!("--header `{h}`: the value holds characters a header cannot")
        })?;
        out.push((name, value));
    }
    Ok(out)
}

/// Parses `a=0.8,b=0.2` into normalised weights.
pub fn mix(spec: &str) -> anyhow::Result<Vec<(String, f64)>> {
    let mut out = Vec::new();
    for part in spec.split(',').filter(|p| !p.trim().is_empty()) {
        let (name, w) = part.split_once('=').map_or((part, "1"), |(n, w)| (n, w));
        let w: f64 = w
            .trim()
            .parse()
            .with_context(|| format!("weight of `{name}` in `{spec}`"))?;
        anyhow::ensure!(w >= 0.0, "weight of `{name}` must not be negative");
        out.push((name.trim().to_string(), w));
    }
    let total: f64 = out.iter().map(|(_, w)| w).sum();
    anyhow::ensure!(total > 0.0, "`{spec}` has no positive weight");
    Ok(out.into_iter().map(|(n, w)| (n, w / total)).collect())
}

/// The endpoint to post to.
pub fn endpoint(target: &str) -> anyhow::Result<http::Uri> {
    let uri: http::Uri = target
        .parse()
        .with_context(|| format!("`{target}` is not a URL"))?;
    if uri.path() == "/" || uri.path().is_empty() {
        let base = target.trim_end_matches('/');
        return format!("{base}/v1/chat/completions")
            .parse()
            .context("building the endpoint");
    }
    Ok(uri)
}

/// The schedule the options describe.
pub fn workload(a: &LoadArgs) -> anyhow::Result<(Workload, Duration)> {
    let duration = match a.count {
        Some(n) => Duration::from_secs_f64(n as f64 / a.rate.max(1e-9)),
        None => a.duration,
    };
    let lanes = mix(&a.lanes)?;
    let tenants: Vec<(Option<String>, f64)> = match &a.tenants {
        Some(t) => mix(t)?.into_iter().map(|(n, w)| (Some(n), w)).collect(),
        None => vec![(None, 1.0)],
    };
    let mut traffic = Vec::new();
    for (lane, lw) in &lanes {
        for (tenant, tw) in &tenants {
            traffic.push(Traffic {
                lane: lane.clone(),
                tenant: tenant.clone(),
                model: a.model.clone(),
                rate: a.rate * lw * tw,
                start: Duration::ZERO,
                end: None,
                prompt_tokens: a.prompt_tokens,
                shared_prefix_tokens: a.shared_prefix_tokens,
                stream: a.stream,
                max_tokens: a.max_tokens,
                timeout: a.timeout,
                tasks: Vec::new(),
                questions: None,
            });
        }
    }
    let mut w = Workload::build(&traffic, &[], duration, a.seed);
    if let Some(n) = a.count {
        w.requests
            .truncate(usize::try_from(n).unwrap_or(usize::MAX));
    }
    Ok((w, duration))
}

/// Runs `workload` against `uri` over HTTP and returns the summary.
pub async fn run_load(
    uri: http::Uri,
    workload: &Workload,
    slo: Option<Duration>,
    run_id: &str,
) -> anyhow::Result<Summary> {
    let recorder = Arc::new(Mutex::new(Recorder::new(slo)?));
    let target = HttpTarget::new(1024);
    let took = drive(
        target,
        uri,
        workload,
        run_id,
        recorder.clone(),
        Arc::new(Progress::default()),
    )
    .await;
    Ok(recorder.lock().summary(took.took, took.sending))
}

/// `sluice bench --target URL ...`: fails (exit 1) when no request succeeded.
pub fn load(a: &LoadArgs) -> anyhow::Result<std::process::ExitCode> {
    let target = a.target.as_deref().context("--target URL is required")?;
    let uri = endpoint(target)?;
    let (mut w, _) = workload(a)?;
    w.headers = headers(a)?;
    let rt = tokio::runtime::Runtime::new()?;
    let summary = rt.block_on(run_load(uri.clone(), &w, a.slo, "bench"))?;
    print!("{}", report(&summary, &uri, a.rate));
    write_json(a.json.as_deref(), &summary)?;
    if summary.all.ok == 0 {
        eprintln!("no request succeeded");
        return Ok(std::process::ExitCode::FAILURE);
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// What a run shows: the rates, the table, and what went wrong in words.
pub fn report(summary: &Summary, uri: &http::Uri, rate: f64) -> String {
    use std::fmt::Write as _;
    let mut out = format!(
        "{} requests to {uri} at {rate:.0}/s (achieved {:.1}/s while sending; {:.1} s in all)\n\n",
        summary.all.count, summary.achieved_rate, summary.duration_s
    );
    let mut columns = vec![("all", &summary.all)];
    for (lane, s) in &summary.lanes {
        if summary.lanes.len() > 1 {
            columns.push((lane.as_str(), s));
        }
    }
    out.push_str(&table(&columns));
    let all = &summary.all;
    if all.cache_hits > 0 {
        let _ = writeln!(
            out,
            "\n{} of {} answers came from sluice's answer cache (x-sluice-cache: hit); the \
             uncached rows are the answers upstreams gave (a rerun with the same seed repeats \
             its prompts)",
            all.cache_hits, all.ok
        );
    }
    let failed_streams: u64 = all.stream_failures.values().sum();
    let by_status: Vec<String> = all
        .errors_by_status
        .iter()
        .filter_map(|(status, n)| {
            // A 2xx here is a stream that failed after its 200: said below, with why.
            let n = if (200..300).contains(status) {
                n.saturating_sub(failed_streams)
            } else {
                *n
            };
            (n > 0).then(|| match *status {
                0 => format!("no answer: {n}"),
                s => format!("{s}: {n}"),
            })
        })
        .collect();
    if !by_status.is_empty() {
        let _ = writeln!(out, "\nfailed, by status: {}", by_status.join(", "));
    }
    if failed_streams > 0 {
        let why: Vec<String> = all
            .stream_failures
            .iter()
            .map(|(w, n)| format!("{w}: {n}"))
            .collect();
        let _ = writeln!(
            out,
            "\nstreams that failed after their 200 (the status was sent before the failure): {}",
            why.join(", ")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixes_normalise() {
        let m = mix("interactive=3,batch=1").unwrap();
        assert_eq!(
            m,
            vec![("interactive".into(), 0.75), ("batch".into(), 0.25)]
        );
        assert!(mix("a=-1").is_err());
        assert!(mix("a=0").is_err());
        assert!(mix("a=x").is_err());
    }

    #[test]
    fn endpoints_get_the_default_path() {
        assert_eq!(
            endpoint("http://127.0.0.1:8080").unwrap().path(),
            "/v1/chat/completions"
        );
        assert_eq!(
            endpoint("http://h:1/x/v1/chat/completions").unwrap().path(),
            "/x/v1/chat/completions"
        );
    }
}
