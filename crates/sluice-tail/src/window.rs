//! A rotating HDR-histogram window: percentiles of the latencies seen over the last N seconds.
//!
//! The window is a ring of slices. Each slice holds one `length / slices` stretch of time; on
//! rotation the oldest slice is cleared and reused, so memory is fixed and a burst of old
//! latencies leaves the window within one slice of `length`.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;
use tokio::time::Instant;

/// Shortest latency the histogram distinguishes: one microsecond.
const LOWEST_US: u64 = 1;
/// Longest latency recorded exactly: one hour; longer values are clamped to it.
const HIGHEST_US: u64 = 3_600_000_000;
/// Two significant digits: a recorded value is within 1% of the true one. Three digits would
/// cost 8x the memory (about 200 KiB per slice) for precision no latency decision needs.
const SIGNIFICANT_DIGITS: u8 = 2;

/// How long a window spans and in how many slices it rotates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowConfig {
    /// The span of time the percentiles describe.
    pub length: Duration,
    /// How many slices the span rotates in (more: smoother, more memory).
    pub slices: u32,
}

impl Default for WindowConfig {
    fn default() -> Self {
        Self {
            length: Duration::from_secs(60),
            slices: 6,
        }
    }
}

/// Why a window could not be built.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WindowError {
    /// Zero slices, or a slice shorter than a millisecond.
    #[error(
        "a latency window needs at least one slice of at least 1 ms (got {slices} slices over {length:?})"
    )]
    BadShape {
        /// Requested slices.
        slices: u32,
        /// Requested length.
        length: Duration,
    },
    /// The histogram bounds were refused (cannot happen with the constants above).
    #[error("histogram: {0}")]
    Histogram(String),
}

/// Percentiles of one window, with the sample count they rest on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Percentiles {
    /// Samples in the window.
    pub count: u64,
    /// Median.
    #[serde(serialize_with = "ms")]
    pub p50: Duration,
    /// 90th percentile.
    #[serde(serialize_with = "ms")]
    pub p90: Duration,
    /// 95th percentile.
    #[serde(serialize_with = "ms")]
    pub p95: Duration,
    /// 99th percentile.
    #[serde(serialize_with = "ms")]
    pub p99: Duration,
    /// 99.9th percentile.
    #[serde(serialize_with = "ms")]
    pub p999: Duration,
    /// Largest sample.
    #[serde(serialize_with = "ms")]
    pub max: Duration,
}

/// Milliseconds, rounded to the microsecond the histogram keeps (`6455.295`, never
/// `6455.294999999999`).
fn ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_micros() as f64 / 1000.0)
}

impl Percentiles {
    /// Reads the standard percentiles off a histogram of microseconds.
    pub fn of(h: &Histogram<u64>) -> Self {
        let at = |q: f64| Duration::from_micros(h.value_at_quantile(q));
        Self {
            count: h.len(),
            p50: at(0.50),
            p90: at(0.90),
            p95: at(0.95),
            p99: at(0.99),
            p999: at(0.999),
            max: Duration::from_micros(h.max()),
        }
    }

    /// The percentiles as `(label, quantile, value)`, for exporters.
    pub fn labelled(&self) -> [(&'static str, f64, Duration); 6] {
        [
            ("p50", 0.5, self.p50),
            ("p90", 0.9, self.p90),
            ("p95", 0.95, self.p95),
            ("p99", 0.99, self.p99),
            ("p999", 0.999, self.p999),
            ("max", 1.0, self.max),
        ]
    }
}

/// Builds an empty histogram of microseconds with sluice's bounds.
pub fn new_histogram() -> Result<Histogram<u64>, WindowError> {
    Histogram::new_with_bounds(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)
        .map_err(|e| WindowError::Histogram(e.to_string()))
}

/// Records `latency` into a histogram of microseconds, clamped into its bounds.
pub fn record_into(h: &mut Histogram<u64>, latency: Duration) {
    let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
    h.saturating_record(us.clamp(LOWEST_US, HIGHEST_US));
}

/// A body quantile is read again from the histogram once the window's count has moved by
/// more than `1 / REREAD_SHARE` of itself since it was read (or a slice rotated). Reading
/// one scans every bucket up to the largest latency twice (about 3,000 buckets for a
/// window reaching into seconds), and hedging reads one on every interactive request: at
/// 1/64 a busy window is scanned once per ~1.5% of new samples, and a quantile moves by at
/// most the 1.6% of rank that the new samples can shift it.
const REREAD_SHARE: u64 = 64;

/// A body quantile as last read, with the count it was read at.
#[derive(Clone, Copy, Debug)]
struct ReadBody {
    q: u64,
    min_samples: u64,
    count: u64,
    value: Option<crate::hedge::BodyQuantile>,
}

/// A rotating window of latencies.
///
/// Besides the slices it keeps their running sum, updated on every record and rotation, so
/// that reading a quantile (hedging does it on every request) is one scan of one histogram
/// rather than a merge of all the slices; body quantiles are kept between reads
/// ([`REREAD_SHARE`]).
#[derive(Debug)]
pub struct LatencyWindow {
    slice_len: Duration,
    slices: Vec<Histogram<u64>>,
    total: Histogram<u64>,
    head: usize,
    head_start: Instant,
    bodies: Vec<ReadBody>,
}

impl LatencyWindow {
    /// An empty window whose first slice starts `now`.
    pub fn new(config: WindowConfig, now: Instant) -> Result<Self, WindowError> {
        let bad = WindowError::BadShape {
            slices: config.slices,
            length: config.length,
        };
        if config.slices == 0 {
            return Err(bad);
        }
        let slice_len = config.length / config.slices;
        if slice_len < Duration::from_millis(1) {
            return Err(bad);
        }
        let slices = (0..config.slices)
            .map(|_| new_histogram())
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            slice_len,
            slices,
            total: new_histogram()?,
            head: 0,
            head_start: now,
            bodies: Vec::new(),
        })
    }

    /// Records one latency observed at `now`.
    pub fn record(&mut self, now: Instant, latency: Duration) {
        self.rotate(now);
        if let Some(h) = self.slices.get_mut(self.head) {
            record_into(h, latency);
            record_into(&mut self.total, latency);
        }
    }

    /// The percentiles of every latency recorded within the window ending `now`.
    pub fn percentiles(&mut self, now: Instant) -> Percentiles {
        self.rotate(now);
        Percentiles::of(&self.total)
    }

    /// The latency at quantile `q` (0..=1) over the window, or `None` with fewer than
    /// `min_samples` samples.
    pub fn quantile(&mut self, now: Instant, q: f64, min_samples: u64) -> Option<Duration> {
        self.rotate(now);
        if self.total.len() < min_samples.max(1) {
            return None;
        }
        Some(Duration::from_micros(self.total.value_at_quantile(q)))
    }

    /// The latency at quantile `q` over the window's body, its cluster of stalls left out
    /// when it has one ([`crate::hedge::body`]), or `None` with fewer than `min_samples`.
    /// Read again from the histogram only when the count moved by more than
    /// `1 / REREAD_SHARE` of itself since the last read of the same `(q, min_samples)`, or a
    /// slice rotated.
    pub fn body_quantile(
        &mut self,
        now: Instant,
        q: f64,
        min_samples: u64,
    ) -> Option<crate::hedge::BodyQuantile> {
        self.rotate(now);
        let count = self.total.len();
        if count < min_samples.max(1) {
            return None;
        }
        let key = q.to_bits();
        let fresh = |r: &&ReadBody| {
            r.q == key
                && r.min_samples == min_samples
                && count.abs_diff(r.count) <= r.count / REREAD_SHARE
        };
        if let Some(r) = self.bodies.iter().find(fresh) {
            return r.value;
        }
        let value = self.read_body(q);
        let read = ReadBody {
            q: key,
            min_samples,
            count,
            value,
        };
        match self
            .bodies
            .iter_mut()
            .find(|r| r.q == key && r.min_samples == min_samples)
        {
            Some(r) => *r = read,
            None => {
                // A few `(q, min_samples)` pairs are read per window; more is a caller's
                // loop, and starting over keeps the list short.
                if self.bodies.len() >= 8 {
                    self.bodies.clear();
                }
                self.bodies.push(read)
            }
        }
        value
    }

    /// Scans the histogram for the body quantile `q`.
    fn read_body(&self, q: f64) -> Option<crate::hedge::BodyQuantile> {
        let total = &self.total;
        let buckets = || {
            total.iter_recorded().map(|v| {
                (
                    Duration::from_micros(v.value_iterated_to()),
                    v.count_at_value(),
                )
            })
        };
        crate::hedge::body::body_quantile(buckets, q)
    }

    /// Moves the head forward to the slice containing `now`, clearing the slices it reuses.
    fn rotate(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.head_start);
        if elapsed < self.slice_len {
            return;
        }
        self.bodies.clear();
        let steps = elapsed.as_nanos() / self.slice_len.as_nanos().max(1);
        let n = self.slices.len();
        let clear = usize::try_from(steps).unwrap_or(usize::MAX).min(n);
        if clear == n {
            for h in &mut self.slices {
                h.reset();
            }
            self.total.reset();
        } else {
            for _ in 0..clear {
                self.head = (self.head + 1) % n;
                if let Some(h) = self.slices.get_mut(self.head) {
                    // Same bounds on both sides, and every count of `h` is in `total`.
                    let _ = self.total.subtract(&*h);
                    h.reset();
                }
            }
        }
        let advance = u32::try_from(steps).unwrap_or(u32::MAX);
        self.head_start += self.slice_len.saturating_mul(advance);
    }
}

#[cfg(test)]
mod tests;
