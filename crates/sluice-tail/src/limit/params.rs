//! `limit = { ... }` of a model group as it is written: the algorithm and its bounds, with
//! their defaults and what makes them wrong; [`LimitParams::spec`] is the limit it builds.

use super::LimitSpec;

/// The algorithm of a concurrency limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LimitAlgorithm {
    /// Additive increase, multiplicative decrease (loss-based: 429s, 503s and timeouts cut
    /// it).
    Aimd,
    /// Netflix's Gradient2 (latency-based), cut on drops too.
    #[default]
    Gradient2,
    /// TCP Vegas (latency-based).
    Vegas,
    /// A fixed limit.
    Fixed,
}

/// A concurrency limit's parameters (every field optional, unknown fields refused). The
/// default is the admission sluice applies to every deployment unless told otherwise:
/// Gradient2 from 64 requests in flight, at most 256.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitParams {
    /// `aimd`, `gradient2`, `vegas` or `fixed`.
    pub algorithm: LimitAlgorithm,
    /// Starting limit (the limit, for `fixed`).
    pub initial: usize,
    /// Lowest limit.
    pub min: usize,
    /// Highest limit.
    pub max: usize,
}

impl Default for LimitParams {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl LimitParams {
    /// The default, usable in constants.
    pub const DEFAULT: Self = Self {
        algorithm: LimitAlgorithm::Gradient2,
        initial: 64,
        min: 1,
        max: 256,
    };

    /// The limit these parameters describe.
    pub const fn spec(&self) -> LimitSpec {
        let (initial, min, max) = (self.initial, self.min, self.max);
        match self.algorithm {
            LimitAlgorithm::Aimd => LimitSpec::Aimd { initial, min, max },
            LimitAlgorithm::Gradient2 => LimitSpec::Gradient2 { initial, min, max },
            LimitAlgorithm::Vegas => LimitSpec::Vegas { initial, max },
            LimitAlgorithm::Fixed => LimitSpec::Fixed(initial),
        }
    }

    /// What is wrong with it, if anything: (field, message); the field is empty when the
    /// bounds disagree with each other.
    pub fn problems(&self) -> Vec<crate::Problem> {
        let (min, initial, max) = (self.min, self.initial, self.max);
        if min == 0 || min > max || !(min..=max).contains(&initial) {
            return vec![(
                "",
                format!(
                    "needs 1 <= min <= initial <= max (got min {min}, initial {initial}, \
                     max {max})"
                ),
            )];
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_gradient2_from_64_to_256() {
        assert_eq!(
            LimitParams::default().spec(),
            LimitSpec::Gradient2 {
                initial: 64,
                min: 1,
                max: 256
            }
        );
    }

    #[test]
    fn bounds_out_of_order_are_a_problem_of_the_table() {
        let bad = LimitParams {
            min: 10,
            initial: 5,
            ..LimitParams::default()
        };
        assert_eq!(bad.problems().len(), 1);
        assert_eq!(bad.problems()[0].0, "");
        assert!(LimitParams::default().problems().is_empty());
    }
}
