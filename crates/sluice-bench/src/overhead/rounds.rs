//! One path measured at one rate in rounds, direct requests interleaved, with the CPU its
//! proxy spent; the percentiles read from lanes, and their medians over the rounds.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use sluice_sim::load::{LaneSummary, Progress, Recorder, drive};

use super::paths::{DIRECT, placeholder, workload};
use super::{Point, Split};
use crate::child::Child;

/// Milliseconds, as the results give them.
fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// A lane's total-time percentiles.
pub(super) fn point(s: &LaneSummary) -> Point {
    Point {
        p50_ms: ms(s.total.p50),
        p99_ms: ms(s.total.p99),
        p999_ms: ms(s.total.p999),
    }
}

/// A lane's first-byte percentiles.
pub(super) fn point_ttfb(s: &LaneSummary) -> Point {
    Point {
        p50_ms: ms(s.ttfb.p50),
        p99_ms: ms(s.ttfb.p99),
        p999_ms: ms(s.ttfb.p999),
    }
}

impl Point {
    /// `self` minus `base`, percentile by percentile.
    pub(super) fn minus(&self, base: &Point) -> Point {
        Point {
            p50_ms: self.p50_ms - base.p50_ms,
            p99_ms: self.p99_ms - base.p99_ms,
            p999_ms: self.p999_ms - base.p999_ms,
        }
    }
}

/// One proxied path at one rate, measured in rounds with direct requests interleaved, and
/// the CPU its proxy process spent.
pub(super) struct Measured {
    /// Every round's requests.
    all: Recorder,
    took: Duration,
    sending: Duration,
    /// What the path added in each round on its own.
    rounds: Vec<Point>,
    /// `None` once the proxy's CPU time could not be read.
    cpu: Option<f64>,
}

/// What one path measured at one rate.
pub(super) struct PathResult {
    /// Direct requests, pooled over the rounds.
    pub(super) direct: Point,
    /// Their time to first byte.
    pub(super) direct_ttfb: Point,
    /// Requests on the path, pooled over the rounds.
    pub(super) path: LaneSummary,
    /// What the path added in each round.
    pub(super) rounds: Vec<Point>,
    /// CPU the proxy spent, seconds.
    pub(super) cpu: Option<f64>,
}

impl Measured {
    pub(super) fn new() -> anyhow::Result<Self> {
        Ok(Self {
            all: Recorder::new(None)?,
            took: Duration::ZERO,
            sending: Duration::ZERO,
            rounds: Vec::new(),
            cpu: Some(0.0),
        })
    }

    /// One round of `phase` at `rate`: requests direct and through `proxy` (lane `path`).
    pub(super) async fn round(
        &mut self,
        target: &Split,
        rate: f64,
        phase: Duration,
        round: u32,
        (path, stream): (&str, bool),
        proxy: &Child,
    ) -> anyhow::Result<()> {
        let w = workload(rate, phase, u64::from(round), path, stream);
        let before = proxy.cpu_seconds();
        let progress = Arc::new(Progress::default());
        let one = Arc::new(Mutex::new(Recorder::new(None)?));
        let took = drive(
            target.clone(),
            placeholder(),
            &w,
            "overhead",
            one.clone(),
            progress,
        )
        .await;
        self.cpu = match (self.cpu, before, proxy.cpu_seconds()) {
            (Some(t), Some(b), Some(a)) => Some(t + a - b),
            _ => None,
        };
        let one = one.lock();
        let summary = one.summary(took.took, took.sending);
        if let (Some(d), Some(p)) = (summary.lanes.get(DIRECT), summary.lanes.get(path)) {
            self.rounds.push(point(p).minus(&point(d)));
        }
        self.all.merge(&one);
        self.took += took.took;
        self.sending += took.sending;
        Ok(())
    }

    /// The rounds pooled.
    pub(super) fn result(self, path: &str) -> anyhow::Result<PathResult> {
        let summary = self.all.summary(self.took, self.sending);
        let (Some(d), Some(p)) = (summary.lanes.get(DIRECT), summary.lanes.get(path)) else {
            anyhow::bail!("no requests were recorded on the {path} path");
        };
        Ok(PathResult {
            direct: point(d),
            direct_ttfb: point_ttfb(d),
            path: p.clone(),
            rounds: self.rounds,
            cpu: self.cpu,
        })
    }
}

/// Each percentile's median over `rounds` (empty when there are none).
pub(super) fn median(rounds: &[Point]) -> Option<Point> {
    let of = |f: fn(&Point) -> f64| {
        let mut v: Vec<f64> = rounds.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        match n {
            0 => None,
            _ if n % 2 == 1 => v.get(n / 2).copied(),
            _ => Some((v.get(n / 2 - 1)? + v.get(n / 2)?) / 2.0),
        }
    };
    Some(Point {
        p50_ms: of(|p| p.p50_ms)?,
        p99_ms: of(|p| p.p99_ms)?,
        p999_ms: of(|p| p.p999_ms)?,
    })
}
