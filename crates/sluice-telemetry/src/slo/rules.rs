//! Prometheus rules for the SLOs: recording rules for each SLO's bad-event ratio per culprit
//! over the windows of the multi-window, multi-burn-rate table (Google SRE Workbook, "Alerting
//! on SLOs": page at 14.4 times the budget over 1 h and 5 min or 6 times over 6 h and 30 min;
//! ticket at 3 times over 1 d and 2 h or once over 3 d and 6 h), and one alert per SLO and
//! culprit whose annotations say which it is and where to look. An upstream slowdown burns
//! only the `upstream_slow` ratio, a queue in sluice only `sluice_queueing`, so each alert
//! fires for its own cause.

use std::fmt::Write;

use super::{Culprit, Objective, Slo};

/// The windows ratios are recorded over.
pub const WINDOWS: [&str; 7] = ["5m", "30m", "1h", "2h", "6h", "1d", "3d"];

/// (severity, long window, short window, burn rate): each pair must both burn.
pub const BURNS: [(&str, &str, &str, f64); 4] = [
    ("page", "1h", "5m", 14.4),
    ("page", "6h", "30m", 6.0),
    ("ticket", "1d", "2h", 3.0),
    ("ticket", "3d", "6h", 1.0),
];

/// The metric the gateway counts events in.
pub const EVENTS: &str = "sluice_slo_events_total";

/// The alert's name for `c`.
pub fn alert_name(c: Culprit) -> &'static str {
    match c {
        Culprit::UpstreamSlow => "SluiceUpstreamSlow",
        Culprit::UpstreamRateLimited => "SluiceUpstreamRateLimited",
        Culprit::UpstreamErrors => "SluiceUpstreamErrors",
        Culprit::SluiceQueueing => "SluiceQueueing",
        Culprit::SluiceOverhead => "SluiceOverhead",
    }
}

/// What an alert on `c` tells the engineer, and where to look: `/admin/diagnose` first (the
/// fastest read of what changed), then metrics and labels sluice exports (a test checks each
/// against a live `/metrics`).
fn advice(c: Culprit) -> (&'static str, &'static str) {
    match c {
        Culprit::UpstreamSlow => (
            "the LLM is slow: upstream time to first byte is spending the error budget, not sluice",
            "GET /admin/diagnose; sluice_upstream_ttfb_seconds by upstream (each attempt from its own start) against sluice_request_ttfb_seconds by lane (what clients waited); /admin/latency; the provider's status page; hedging and fallbacks",
        ),
        Culprit::UpstreamRateLimited => (
            "the provider's rate limit: waits for its pace, 429s and the pauses after them are spending the error budget",
            "GET /admin/diagnose; sluice_rate_limit_waits_total by lane (calls sluice held for the provider's pace or a pause after a 429); sluice_upstream_attempts_total by upstream and outcome (the 429s that reached the provider are outcome upstream_rejected); sluice_requests_total by lane; sluice_request_ttfb_seconds by lane; /admin/upstreams (pacing, cooling_after_429); the provider's quota",
        ),
        Culprit::UpstreamErrors => (
            "the upstream is failing: its 5xx, timeouts and dropped connections are spending the error budget",
            "GET /admin/diagnose; sluice_requests_total by upstream and code; sluice_upstream_attempts_total by upstream and outcome; sluice_upstream_breaker_state; /admin/upstreams",
        ),
        Culprit::SluiceQueueing => (
            "we are slow: requests wait in sluice's queue for a slot, the upstream answers in time",
            "GET /admin/diagnose; sluice_queue_duration_seconds by lane; sluice_admission_requests{state=\"queued\"} by lane; sluice_upstream_concurrency_limit; sluice_requests_total by lane",
        ),
        Culprit::SluiceOverhead => (
            "we are slow: time inside sluice other than queueing, or sluice's own errors",
            "GET /admin/diagnose; sluice_requests_total by code (internal_error is sluice's own); sluice_queue_duration_seconds by lane; the gateway's CPU and logs; Server-Timing of slow requests",
        ),
    }
}

/// Where an alert on `c` says to look (its `look_at`).
pub fn look_at(c: Culprit) -> String {
    advice(c).1.to_string()
}

fn budget(slo: &Slo) -> Option<f64> {
    slo.target().map(|target| 1.0 - target)
}

/// Seconds in a window's name (`5m`, `1h`, `3d`).
fn seconds(window: &str) -> u64 {
    let (n, unit) = window.split_at(window.len() - 1);
    let n: u64 = n.parse().unwrap_or(0);
    n * match unit {
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => 1,
    }
}

/// The range a window's rules read, `speed` times shorter (a rehearsal's clock): the name
/// itself at speed 1, else whole seconds.
fn range(window: &str, speed: u32) -> String {
    if speed <= 1 {
        return window.to_string();
    }
    format!("{}s", (seconds(window) / u64::from(speed)).max(1))
}

/// The rules file for `slos`, as Prometheus reads it.
pub fn rules(slos: &[Slo]) -> String {
    rules_at(slos, 1)
}

/// [`rules`] with every window `speed` times shorter, for rehearsing an incident against a
/// real Prometheus in minutes rather than hours (the recorded series keep their names).
pub fn rules_at(slos: &[Slo], speed: u32) -> String {
    let mut out =
        String::from("# Written by `sluice slo rules`; regenerate rather than edit.\ngroups:\n");
    let events: Vec<&Slo> = slos.iter().filter(|s| budget(s).is_some()).collect();
    if !events.is_empty() {
        out.push_str("  - name: sluice-slo-recording\n    rules:\n");
        for w in WINDOWS {
            let r = range(w, speed);
            let _ = write!(
                out,
                "      - record: sluice_slo:events:rate{w}\n        expr: sum by (slo) (rate({EVENTS}[{r}]))\n"
            );
            let _ = write!(
                out,
                "      - record: sluice_slo:bad:ratio_rate{w}\n        expr: sum by (slo, culprit) (rate({EVENTS}{{outcome=\"bad\"}}[{r}])) / on (slo) group_left sum by (slo) (rate({EVENTS}[{r}]))\n"
            );
        }
        out.push_str("  - name: sluice-slo-alerts\n    rules:\n");
        for slo in &events {
            let Some(budget) = budget(slo) else {
                continue;
            };
            for c in Culprit::ALL {
                for severity in ["page", "ticket"] {
                    write_alert(&mut out, slo, budget, c, severity);
                }
            }
        }
    }
    let shares: Vec<(&Slo, f64)> = slos
        .iter()
        .filter_map(|s| match s.objective {
            Objective::CacheShare { floor } => Some((s, floor)),
            _ => None,
        })
        .collect();
    if !shares.is_empty() {
        out.push_str("  - name: sluice-slo-prompt-cache\n    rules:\n");
        for w in ["5m", "1h"] {
            let r = range(w, speed);
            let _ = write!(
                out,
                "      - record: sluice_slo:prompt_cache_share:ratio_rate{w}\n        expr: sum by (group) (rate(sluice_prompt_cache_tokens_total{{kind=\"cached\"}}[{r}])) / sum by (group) (rate(sluice_prompt_cache_tokens_total{{kind=\"prompt\"}}[{r}]))\n"
            );
        }
        let pending = range("15m", speed);
        for (slo, floor) in shares {
            let groups = group_selector(slo);
            let _ = write!(
                out,
                "      - alert: SluicePromptCacheShareLow\n        expr: sluice_slo:prompt_cache_share:ratio_rate1h{groups} < {floor} and sluice_slo:prompt_cache_share:ratio_rate5m{groups} < {floor}\n        for: {pending}\n        labels:\n          severity: ticket\n          slo: {name}\n          culprit: prompt_churn\n        annotations:\n          summary: \"{name}: the provider's prompt cache serves less than {floor} of the prompt tokens of {{{{ $labels.group }}}}\"\n          look_at: \"GET /admin/prefixes (what parts the prefixes: timestamps, ids, tool order), sluice_prefix_churn_total, normalise and affinity on the group\"\n",
                name = slo.name,
            );
        }
    }
    out
}

/// A label selector for an SLO's model groups (`{group=~"a|b"}`), or nothing.
fn group_selector(slo: &Slo) -> String {
    if slo.groups.is_empty() {
        return String::new();
    }
    let names: Vec<&str> = slo.groups.iter().map(|g| &**g).collect();
    format!("{{group=~\"{}\"}}", names.join("|"))
}

fn write_alert(out: &mut String, slo: &Slo, budget: f64, c: Culprit, severity: &str) {
    let name = &slo.name;
    let culprit = c.label();
    let series =
        |w: &str| format!("sluice_slo:bad:ratio_rate{w}{{slo=\"{name}\", culprit=\"{culprit}\"}}");
    let branches: Vec<String> = BURNS
        .iter()
        .filter(|(s, ..)| *s == severity)
        .map(|(_, long, short, burn)| {
            let limit = format_limit(burn * budget);
            format!(
                "({} > {limit} and {} > {limit})",
                series(long),
                series(short)
            )
        })
        .collect();
    let (summary, look_at) = advice(c);
    let _ = write!(
        out,
        "      - alert: {alert}\n        expr: {expr}\n        labels:\n          severity: {severity}\n          slo: {name}\n          culprit: {culprit}\n        annotations:\n          summary: \"{name}: {summary}\"\n          look_at: \"{look_at}\"\n",
        alert = alert_name(c),
        expr = branches.join(" or "),
        look_at = look_at.replace('"', "\\\""),
    );
}

/// A threshold written without float noise (`0.144`, not `0.14400000000000002`).
fn format_limit(x: f64) -> String {
    let s = format!("{x:.10}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::Measure;
    use super::*;

    fn slos() -> Vec<Slo> {
        vec![
            Slo {
                name: "interactive_ttfb".into(),
                objective: Objective::Latency {
                    measure: Measure::Ttfb,
                    threshold: Duration::from_secs(4),
                    target: 0.99,
                },
                lanes: vec!["interactive".into()],
                groups: Vec::new(),
            },
            Slo {
                name: "cache".into(),
                objective: Objective::CacheShare { floor: 0.5 },
                lanes: Vec::new(),
                groups: vec!["chat".into(), "docs".into()],
            },
        ]
    }

    #[test]
    fn every_culprit_gets_a_page_and_a_ticket_at_the_workbook_burn_rates() {
        let r = rules(&slos());
        for c in Culprit::ALL {
            assert_eq!(r.matches(&format!("alert: {}\n", alert_name(c))).count(), 2);
        }
        assert!(r.contains(
            "(sluice_slo:bad:ratio_rate1h{slo=\"interactive_ttfb\", culprit=\"upstream_slow\"} > 0.144 and sluice_slo:bad:ratio_rate5m{slo=\"interactive_ttfb\", culprit=\"upstream_slow\"} > 0.144) or (sluice_slo:bad:ratio_rate6h{slo=\"interactive_ttfb\", culprit=\"upstream_slow\"} > 0.06"
        ));
        assert!(r.contains(
            "ratio_rate3d{slo=\"interactive_ttfb\", culprit=\"sluice_queueing\"} > 0.01 and"
        ));
        for w in WINDOWS {
            assert!(r.contains(&format!("record: sluice_slo:bad:ratio_rate{w}\n")));
        }
        assert!(r.contains("alert: SluicePromptCacheShareLow"));
        assert!(r.contains("ratio_rate1h{group=~\"chat|docs\"} < 0.5"));
    }

    #[test]
    fn a_rehearsal_reads_shorter_ranges_under_the_same_names() {
        let r = rules_at(&slos(), 10);
        assert!(r.contains("record: sluice_slo:bad:ratio_rate1h\n"));
        assert!(r.contains("[360s]"), "1 h at speed 10");
        assert!(r.contains("[30s]"), "5 min at speed 10");
        assert!(r.contains("for: 90s"));
        assert!(!r.contains("[1h]"));
        assert_eq!(rules_at(&slos(), 1), rules(&slos()));
    }

    #[test]
    fn limits_are_written_without_float_noise() {
        assert_eq!(format_limit(14.4 * 0.01), "0.144");
        assert_eq!(format_limit(6.0 * 0.001), "0.006");
        assert_eq!(format_limit(1.0), "1");
    }

    #[test]
    fn no_slos_no_groups() {
        assert_eq!(rules(&[]).lines().count(), 2);
    }
}
