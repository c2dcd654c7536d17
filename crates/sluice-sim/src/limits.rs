//! Provider rate limits (requests and tokens per minute) as continuously refilling buckets,
//! and the headers a 429 carries in OpenAI's and Anthropic's formats.

use std::time::Duration;

use tokio::time::Instant;

/// A bucket that refills `per_minute` units a minute and holds at most `capacity` (a limit
/// "quantised" to a shorter period, as providers enforce them, holds less than a minute's).
#[derive(Clone, Debug)]
pub struct MinuteBucket {
    per_minute: f64,
    capacity: f64,
    level: f64,
    at: Instant,
}

impl MinuteBucket {
    /// A full bucket refilling `per_minute`, holding `burst` (at least 1; a minute's worth
    /// when `None`), at `now`.
    pub fn new(per_minute: u64, burst: Option<u64>, now: Instant) -> Self {
        let capacity = burst.unwrap_or(per_minute).clamp(1, per_minute.max(1)) as f64;
        Self {
            per_minute: per_minute as f64,
            capacity,
            level: capacity,
            at: now,
        }
    }

    /// The configured per-minute limit.
    pub fn limit(&self) -> u64 {
        self.per_minute as u64
    }

    fn refill(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        self.level = (self.level + dt * self.per_minute / 60.0).min(self.capacity);
        self.at = now;
    }

    /// Units left at `now`.
    pub fn remaining(&mut self, now: Instant) -> u64 {
        self.refill(now);
        self.level.max(0.0) as u64
    }

    /// Time until `n` units are available at `now`.
    pub fn wait_for(&mut self, now: Instant, n: u64) -> Duration {
        self.refill(now);
        let missing = (n as f64).min(self.capacity) - self.level;
        if missing <= 0.0 || self.per_minute <= 0.0 {
            return Duration::ZERO;
        }
        Duration::from_secs_f64(missing * 60.0 / self.per_minute)
    }

    /// Time until the bucket is full again.
    pub fn until_full(&mut self, now: Instant) -> Duration {
        self.wait_for(now, self.capacity as u64)
    }

    /// Returns `n` units taken by a request that was refused after all.
    pub fn refund(&mut self, n: u64) {
        self.level = (self.level + n as f64).min(self.capacity);
    }

    /// Takes `n` units if there are enough.
    pub fn try_take(&mut self, now: Instant, n: u64) -> bool {
        self.refill(now);
        if self.level + 1e-9 >= n as f64 {
            self.level -= n as f64;
            true
        } else {
            false
        }
    }
}

/// Which provider's header names to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// OpenAI chat completions and `x-ratelimit-*`.
    #[default]
    Openai,
    /// Anthropic Messages and `anthropic-ratelimit-*`.
    Anthropic,
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
    let (y, mo, dd) = civil_from_days(days as i64);
    format!("{y:04}-{mo:02}-{dd:02}T{h:02}:{m:02}:{s:02}Z")
}

/// Days since 1970-01-01 → (year, month, day) (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
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

    #[tokio::test(start_paused = true)]
    async fn a_bucket_admits_its_limit_then_refills_per_minute() {
        let t0 = Instant::now();
        let mut b = MinuteBucket::new(60, None, t0);
        let admitted = (0..120).filter(|_| b.try_take(t0, 1)).count();
        assert_eq!(admitted, 60);
        assert_eq!(b.wait_for(t0, 1), Duration::from_secs(1));
        assert!(!b.try_take(t0 + Duration::from_millis(999), 1));
        assert!(b.try_take(t0 + Duration::from_secs(1), 1));
        // Over the next minute exactly one more per second.
        let mut more = 0;
        for s in 2..=61 {
            while b.try_take(t0 + Duration::from_secs(s), 1) {
                more += 1;
            }
        }
        assert_eq!(more, 60);
    }

    #[tokio::test(start_paused = true)]
    async fn a_quantised_bucket_admits_only_its_burst_at_once() {
        let t0 = Instant::now();
        let mut b = MinuteBucket::new(600, Some(20), t0);
        assert_eq!((0..100).filter(|_| b.try_take(t0, 1)).count(), 20);
        // Still 600 a minute on average: ten a second.
        let later = t0 + Duration::from_secs(1);
        assert_eq!((0..100).filter(|_| b.try_take(later, 1)).count(), 10);
        assert_eq!(b.limit(), 600);
    }

    #[test]
    fn go_durations_look_like_openais() {
        assert_eq!(go_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(go_duration(Duration::from_secs(1)), "1s");
        assert_eq!(go_duration(Duration::from_secs(360)), "6m0s");
        assert_eq!(go_duration(Duration::from_millis(179_560)), "2m59.56s");
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_787), (2026, 11, 30));
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
