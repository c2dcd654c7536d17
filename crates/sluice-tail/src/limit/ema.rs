//! A running average of latencies: a plain mean over its first samples, then exponential.

/// An exponential average that starts as a plain mean over its first `warmup` samples.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ExpAvg {
    pub(crate) value: f64,
    count: u32,
    warmup: u32,
    factor: f64,
}

impl ExpAvg {
    pub(crate) fn new(window: u32, warmup: u32) -> Self {
        Self {
            value: 0.0,
            count: 0,
            warmup,
            factor: 2.0 / (f64::from(window) + 1.0),
        }
    }

    pub(crate) fn add(&mut self, x: f64) -> f64 {
        if self.count < self.warmup {
            self.count += 1;
            self.value += (x - self.value) / f64::from(self.count);
        } else {
            self.value = self.value * (1.0 - self.factor) + x * self.factor;
        }
        self.value
    }
}
