//! How often a task looks again at a candidate it does not choose: each accrues credit in
//! proportion to the chance that its answers would overturn the choice (its quality above
//! the floor, or above what would make it the better value), so a candidate rejected on
//! decisive evidence is looked at rarely, one near the line often, and one whose evidence
//! fades or whose first answers again look good is looked at more and more.

use sluice_tail::normal::upper_tail;

use super::Belief;

/// Credit a candidate may hold: revisits are never saved up into a burst.
const MAX_OWED: f64 = 1.0;
/// Credit that makes a look due (1, less what sums of small shares lose to rounding).
const DUE: f64 = 1.0 - 1e-9;

/// The chance, on `belief`, that the candidate's quality exceeds `threshold` (the normal
/// approximation of the Beta posterior): 0 for a threshold at or above 1, 1 at or below 0.
pub(super) fn overturn(belief: &Belief, threshold: f64) -> f64 {
    if threshold >= 1.0 {
        return 0.0;
    }
    if threshold <= 0.0 {
        return 1.0;
    }
    let sd = belief.variance().sqrt();
    if sd <= 0.0 {
        return f64::from(u8::from(belief.mean() > threshold));
    }
    upper_tail((threshold - belief.mean()) / sd)
}

/// One candidate the choice passed over: its index, its chance to overturn the choice, and
/// the share of the task's requests it may draw at a chance of 1.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Passed {
    pub index: usize,
    pub chance: f64,
    pub share: f64,
}

/// Adds each passed-over candidate's credit for one request (its share times its chance,
/// all of them together at most `total`), and takes the one owed a look, if any: the most
/// owed (of equals, the first).
pub(super) fn accrue(owed: &mut [f64], passed: &[Passed], total: f64) -> Option<usize> {
    let want: f64 = passed.iter().map(|p| p.share * p.chance).sum();
    let scale = if want > total && want > 0.0 {
        total / want
    } else {
        1.0
    };
    for p in passed {
        if let Some(o) = owed.get_mut(p.index) {
            *o = (*o + p.share * p.chance * scale).min(MAX_OWED);
        }
    }
    let i = passed
        .iter()
        .map(|p| p.index)
        .filter(|&i| owed.get(i).is_some_and(|&o| o >= DUE))
        .max_by(|&a, &b| {
            owed[a]
                .total_cmp(&owed[b])
                .then(std::cmp::Ordering::Greater)
        })?;
    owed[i] = (owed[i] - 1.0).max(0.0);
    Some(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn belief(good: f64, bad: f64) -> Belief {
        Belief {
            alpha: 1.0 + good,
            beta: 1.0 + bad,
        }
    }

    #[test]
    fn decisive_evidence_leaves_little_chance_and_faded_evidence_more() {
        let floor = 0.8;
        let decided = overturn(&belief(128.0, 72.0), floor);
        let faded = overturn(&belief(8.0, 4.5), floor);
        let near = overturn(&belief(30.0, 10.0), floor);
        assert!(decided < 1e-4, "{decided}");
        assert!(faded > 0.05 && faded < 0.2, "{faded}");
        assert!(near > faded && near < 0.5, "{near}");
        assert_eq!(overturn(&belief(5.0, 0.0), 1.0), 0.0);
        assert_eq!(overturn(&belief(0.0, 5.0), 0.0), 1.0);
    }

    #[test]
    fn credit_follows_the_chance_and_the_total_is_capped() {
        let mut owed = vec![0.0; 3];
        let passed = [
            Passed {
                index: 0,
                chance: 0.02,
                share: 0.05,
            },
            Passed {
                index: 2,
                chance: 0.5,
                share: 0.05,
            },
        ];
        let mut looks = [0u32; 3];
        for _ in 0..10_000 {
            if let Some(i) = accrue(&mut owed, &passed, 0.05) {
                looks[i] += 1;
            }
        }
        // 0.05 x 0.02 and 0.05 x 0.5 of 10,000 requests.
        assert!(
            looks[0] == 10 && looks[1] == 0 && (249..=250).contains(&looks[2]),
            "{looks:?}"
        );
        // Capped: two candidates at chance 1 share the total between them.
        let mut owed = vec![0.0; 2];
        let both = [0, 1].map(|index| Passed {
            index,
            chance: 1.0,
            share: 0.05,
        });
        let looks = (0..10_000)
            .filter_map(|_| accrue(&mut owed, &both, 0.05))
            .count();
        // (A look that falls due while the other's is taken waits a request: one may be lost
        // to the cap on credit.)
        assert!((499..=500).contains(&looks), "{looks}");
    }
}
