//! What to send and when: open-loop Poisson traffic and bursts, merged into one schedule.

use std::sync::Arc;
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, Exp};
use serde::Deserialize;

/// A steady stream of requests with Poisson arrivals.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default)]
pub struct Traffic {
    /// Lane, sent as `x-sluice-lane` (interactive, batch).
    pub lane: String,
    /// Tenant, sent as `x-sluice-tenant`.
    pub tenant: Option<String>,
    /// Model group.
    pub model: String,
    /// Mean requests per second.
    pub rate: f64,
    /// When the traffic starts.
    #[serde(with = "sluice_config::duration")]
    pub start: Duration,
    /// When it stops (defaults to the end of the run).
    #[serde(with = "sluice_config::duration::option")]
    pub end: Option<Duration>,
    /// Prompt size in tokens.
    pub prompt_tokens: u32,
    /// Leading tokens shared by every request of this traffic (a stable system prompt).
    pub shared_prefix_tokens: u32,
    /// Whether to stream.
    pub stream: bool,
    /// `max_tokens`, if any.
    pub max_tokens: Option<u32>,
    /// The request's deadline, sent as `x-sluice-timeout-ms`, if any.
    #[serde(with = "sluice_config::duration::option")]
    pub timeout: Option<Duration>,
    /// Tasks its requests declare in `x-sluice-task`, in turn (none when empty).
    pub tasks: Vec<String>,
    /// Where its requests' questions come from (none: a document unique to each request).
    pub questions: Option<Questions>,
}

/// A source of questions for a traffic's requests.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Questions {
    /// The FAQ world's ([`crate::faq`]): popular questions asked again, in other words and
    /// as look-alikes.
    Faq,
}

impl Default for Traffic {
    fn default() -> Self {
        Self {
            lane: "interactive".into(),
            tenant: None,
            model: "chat".into(),
            rate: 10.0,
            start: Duration::ZERO,
            end: None,
            prompt_tokens: 500,
            shared_prefix_tokens: 0,
            stream: true,
            max_tokens: None,
            timeout: None,
            tasks: Vec::new(),
            questions: None,
        }
    }
}

/// Many requests at (nearly) one moment: a batch job's flood.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default)]
pub struct Burst {
    /// Lane.
    pub lane: String,
    /// Tenant.
    pub tenant: Option<String>,
    /// Model group.
    pub model: String,
    /// When the burst starts.
    #[serde(with = "sluice_config::duration")]
    pub at: Duration,
    /// How many requests.
    pub count: u32,
    /// Spread evenly over this span (zero: all at once).
    #[serde(with = "sluice_config::duration")]
    pub spread: Duration,
    /// Prompt size in tokens.
    pub prompt_tokens: u32,
    /// Shared leading tokens.
    pub shared_prefix_tokens: u32,
    /// Whether to stream.
    pub stream: bool,
    /// `max_tokens`, if any.
    pub max_tokens: Option<u32>,
    /// The request's deadline, sent as `x-sluice-timeout-ms`, if any.
    #[serde(with = "sluice_config::duration::option")]
    pub timeout: Option<Duration>,
    /// Tasks its requests declare in `x-sluice-task`, in turn (none when empty).
    pub tasks: Vec<String>,
}

/// Both kinds of load describe their requests with the same keys, kept flat in the files
/// (serde's `flatten` would hide unknown keys from the config checker).
macro_rules! shape_of {
    ($t:ty) => {
        impl $t {
            /// The shape of its requests.
            pub fn shape(&self) -> Shape {
                Shape {
                    lane: self.lane.clone(),
                    tenant: self.tenant.clone(),
                    model: self.model.clone(),
                    prompt_tokens: self.prompt_tokens,
                    shared_prefix_tokens: self.shared_prefix_tokens.min(self.prompt_tokens),
                    stream: self.stream,
                    max_tokens: self.max_tokens,
                    timeout: self.timeout,
                    tasks: self.tasks.clone(),
                }
            }
        }
    };
}

shape_of!(Traffic);
shape_of!(Burst);

impl Default for Burst {
    fn default() -> Self {
        Self {
            lane: "batch".into(),
            tenant: None,
            model: "chat".into(),
            at: Duration::ZERO,
            count: 100,
            spread: Duration::ZERO,
            prompt_tokens: 2000,
            shared_prefix_tokens: 0,
            stream: false,
            max_tokens: None,
            timeout: None,
            tasks: Vec::new(),
        }
    }
}

/// What a request looks like, shared by every request of one traffic or burst.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Lane.
    pub lane: String,
    /// Tenant.
    pub tenant: Option<String>,
    /// Model group.
    pub model: String,
    /// Prompt tokens.
    pub prompt_tokens: u32,
    /// Shared leading tokens (never more than the prompt).
    pub shared_prefix_tokens: u32,
    /// Stream or not.
    pub stream: bool,
    /// `max_tokens`.
    pub max_tokens: Option<u32>,
    /// Deadline.
    pub timeout: Option<Duration>,
    /// Tasks declared in turn.
    pub tasks: Vec<String>,
}

impl Shape {
    /// The task request `i` declares, if its traffic declares tasks.
    pub fn task(&self, i: usize) -> Option<&str> {
        (!self.tasks.is_empty()).then(|| self.tasks[i % self.tasks.len()].as_str())
    }
}

/// One scheduled request.
#[derive(Clone, Debug, PartialEq)]
pub struct Planned {
    /// When it leaves, after the start.
    pub at: Duration,
    /// What it looks like.
    pub shape: Arc<Shape>,
    /// Its question, when its traffic asks them (else a document unique to it).
    pub question: Option<Arc<str>>,
}

/// The whole schedule, sorted by time.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Workload {
    /// Requests in the order they leave.
    pub requests: Vec<Planned>,
    /// Headers every request carries (an API key, say).
    pub headers: Vec<(http::HeaderName, http::HeaderValue)>,
    /// Who scores the answers of requests that declare a task (the simulated client's own
    /// check), sending each verdict to `/v1/feedback`.
    pub judge: Option<Arc<crate::judge::Judge>>,
}

impl Workload {
    /// Builds the schedule for a run of `duration` from `traffic` and `bursts`, seeded.
    pub fn build(traffic: &[Traffic], bursts: &[Burst], duration: Duration, seed: u64) -> Self {
        let mut requests = Vec::new();
        for (i, t) in traffic.iter().enumerate() {
            let mut rng = StdRng::seed_from_u64(seed ^ (0x9e37_79b9 + i as u64));
            let end = t.end.unwrap_or(duration).min(duration);
            let shape = Arc::new(t.shape());
            let times = poisson(&mut rng, t.rate, t.start, end);
            let questions: Vec<Option<Arc<str>>> = match t.questions {
                Some(Questions::Faq) => match crate::faq::shipped() {
                    Some(faq) => faq
                        .asks(times.len(), seed ^ (0x51ed_2701 + i as u64))
                        .into_iter()
                        .map(Some)
                        .collect(),
                    None => vec![None; times.len()],
                },
                None => vec![None; times.len()],
            };
            requests.extend(
                times
                    .into_iter()
                    .zip(questions)
                    .map(|(at, question)| Planned {
                        at,
                        shape: shape.clone(),
                        question,
                    }),
            );
        }
        for b in bursts.iter().filter(|b| b.at < duration) {
            let shape = Arc::new(b.shape());
            for k in 0..b.count {
                let offset = if b.count > 1 {
                    b.spread.mul_f64(f64::from(k) / f64::from(b.count))
                } else {
                    Duration::ZERO
                };
                requests.push(Planned {
                    at: b.at + offset,
                    shape: shape.clone(),
                    question: None,
                });
            }
        }
        // Stable: equal times keep their traffic order, so runs repeat.
        requests.sort_by_key(|p| p.at);
        Self {
            requests,
            headers: Vec::new(),
            judge: None,
        }
    }
}

/// Poisson arrival times at `rate` per second in `[start, end)`.
pub fn poisson(rng: &mut StdRng, rate: f64, start: Duration, end: Duration) -> Vec<Duration> {
    let Ok(exp) = Exp::new(rate) else {
        return Vec::new();
    };
    if rate <= 0.0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut t = start.as_secs_f64();
    let end = end.as_secs_f64();
    loop {
        t += exp.sample(rng);
        if t >= end {
            return out;
        }
        out.push(Duration::from_secs_f64(t));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poisson_has_the_right_rate_and_spread() {
        let mut rng = StdRng::seed_from_u64(1);
        let times = poisson(&mut rng, 100.0, Duration::ZERO, Duration::from_secs(100));
        assert!((9_700..=10_300).contains(&times.len()), "{}", times.len());
        // Exponential gaps: their standard deviation equals their mean (CV = 1).
        let gaps: Vec<f64> = times
            .windows(2)
            .map(|w| (w[1] - w[0]).as_secs_f64())
            .collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        assert!((var.sqrt() / mean - 1.0).abs() < 0.05);
    }

    #[test]
    fn bursts_and_traffic_merge_in_time_order() {
        let traffic = [Traffic {
            rate: 10.0,
            ..Traffic::default()
        }];
        let bursts = [Burst {
            at: Duration::from_secs(5),
            count: 50,
            spread: Duration::from_secs(1),
            ..Burst::default()
        }];
        let w = Workload::build(&traffic, &bursts, Duration::from_secs(10), 3);
        assert!(w.requests.windows(2).all(|p| p[0].at <= p[1].at));
        assert_eq!(
            w.requests
                .iter()
                .filter(|p| p.shape.lane == "batch")
                .count(),
            50
        );
        let again = Workload::build(&traffic, &bursts, Duration::from_secs(10), 3);
        assert_eq!(w, again, "same seed, same schedule");
    }

    #[test]
    fn bursts_after_the_end_are_dropped() {
        let bursts = [Burst {
            at: Duration::from_secs(30),
            ..Burst::default()
        }];
        assert!(
            Workload::build(&[], &bursts, Duration::from_secs(20), 1)
                .requests
                .is_empty()
        );
    }
}
