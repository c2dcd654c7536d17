//! A running average of latencies: a plain mean over its first samples, then exponential.

/// An exponential average that starts as a plain mean over its first `warmup` samples.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ExpAvg {
    pub(crate) value: f64,
    count: u32,
    warmup: u32,
    factor: f64,
    /// The factor for samples above the average (the same as `factor` unless set).
    rising: f64,
}

impl ExpAvg {
    pub(crate) fn new(window: u32, warmup: u32) -> Self {
        Self {
            value: 0.0,
            count: 0,
            warmup,
            factor: 2.0 / (f64::from(window) + 1.0),
            rising: 2.0 / (f64::from(window) + 1.0),
        }
    }

    /// The same average, but samples above it move it as if it spanned `window` samples:
    /// slower to rise than to fall, a floor that a lasting congestion does not lift soon.
    pub(crate) fn rising_over(mut self, window: u32) -> Self {
        self.rising = 2.0 / (f64::from(window) + 1.0);
        self
    }

    pub(crate) fn add(&mut self, x: f64) -> f64 {
        if self.count < self.warmup {
            self.count += 1;
            self.value += (x - self.value) / f64::from(self.count);
        } else {
            let f = if x > self.value {
                self.rising
            } else {
                self.factor
            };
            self.value = self.value * (1.0 - f) + x * f;
        }
        self.value
    }
}
