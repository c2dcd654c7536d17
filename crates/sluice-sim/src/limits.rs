//! Provider rate limits as the simulator reports them: the headers an answer or a 429
//! carries, in OpenAI's and Anthropic's formats.

use std::time::Duration;

/// Which provider's header names to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// OpenAI chat completions and `x-ratelimit-*`.
    #[default]
    Openai,
    /// Anthropic Messages and `anthropic-ratelimit-*`.
    Anthropic,
    /// Gemini's `generateContent`: no rate-limit headers, a 429's delay in its body.
    Gemini,
    /// Bedrock's Converse: no rate-limit headers, a bare 429 (`ThrottlingException`).
    Bedrock,
}

/// The state of both limits, as headers report it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RateState {
    /// (limit, remaining, reset) for requests, when limited.
    pub requests: Option<(u64, u64, Duration)>,
    /// (limit, remaining, reset) for tokens, when limited.
    pub tokens: Option<(u64, u64, Duration)>,
    /// Seconds to wait, on a 429.
    pub retry_after: Option<Duration>,
}

/// A Go-style duration as OpenAI writes resets: `1s`, `6m0s`, `2m59.56s`, `250ms`.
pub fn go_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let secs = d.as_secs_f64();
    let minutes = (secs / 60.0).floor() as u64;
    let rest = secs - minutes as f64 * 60.0;
    let rest = format!("{rest:.2}");
    let rest = rest.trim_end_matches('0').trim_end_matches('.');
    if minutes > 0 {
        format!("{minutes}m{rest}s")
    } else {
        format!("{rest}s")
    }
}

/// RFC 3339 time `d` after `wall_now`, as Anthropic writes resets.
fn rfc3339_after(wall_now: std::time::SystemTime, d: Duration) -> String {
    let t = wall_now + d;
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map(|x| x.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (h, m, s) = (rem / 3600, (rem % 3600) / 60, rem % 60);
    let (y, mo, dd) = sluice_core::calendar::civil_from_days(days as i64);
    format!("{y:04}-{mo:02}-{dd:02}T{h:02}:{m:02}:{s:02}Z")
}

impl RateState {
    /// The headers for `api`.
    pub fn headers(&self, api: Api) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if let Some(r) = self.retry_after {
            out.push((
                "retry-after".into(),
                r.as_secs_f64().ceil().max(1.0).to_string(),
            ));
        }
        let wall = std::time::SystemTime::now();
        for (dim, state) in [("requests", self.requests), ("tokens", self.tokens)] {
            let Some((limit, remaining, reset)) = state else {
                continue;
            };
            match api {
                Api::Gemini | Api::Bedrock => {}
                Api::Openai => {
                    out.push((format!("x-ratelimit-limit-{dim}"), limit.to_string()));
                    out.push((
                        format!("x-ratelimit-remaining-{dim}"),
                        remaining.to_string(),
                    ));
                    out.push((format!("x-ratelimit-reset-{dim}"), go_duration(reset)));
                }
                Api::Anthropic => {
                    out.push((
                        format!("anthropic-ratelimit-{dim}-limit"),
                        limit.to_string(),
                    ));
                    out.push((
                        format!("anthropic-ratelimit-{dim}-remaining"),
                        remaining.to_string(),
                    ));
                    out.push((
                        format!("anthropic-ratelimit-{dim}-reset"),
                        rfc3339_after(wall, reset),
                    ));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_look_like_openais() {
        assert_eq!(go_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(go_duration(Duration::from_secs(1)), "1s");
        assert_eq!(go_duration(Duration::from_secs(360)), "6m0s");
        assert_eq!(go_duration(Duration::from_millis(179_560)), "2m59.56s");
    }

    #[test]
    fn headers_in_both_formats() {
        let s = RateState {
            requests: Some((60, 0, Duration::from_secs(1))),
            tokens: None,
            retry_after: Some(Duration::from_millis(400)),
        };
        let o = s.headers(Api::Openai);
        assert!(o.contains(&("retry-after".into(), "1".into())));
        assert!(o.contains(&("x-ratelimit-remaining-requests".into(), "0".into())));
        assert!(o.contains(&("x-ratelimit-reset-requests".into(), "1s".into())));
        let a = s.headers(Api::Anthropic);
        assert!(
            a.iter()
                .any(|(k, v)| k == "anthropic-ratelimit-requests-reset" && v.ends_with('Z'))
        );
    }
}
