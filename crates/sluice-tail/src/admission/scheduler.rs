//! Who gets a free slot: the lane furthest below its guaranteed share, ties going to the
//! earlier lane. A lane's share is a guarantee under contention, not a cap: when others
//! leave slots idle, any lane may use them (Netflix's partitioned limiter).
//!
//! Two resources are shared: slots (the concurrency limit) and, behind a rate-limited
//! upstream, the calls the pacer lets out. A lane's fill is the larger of its share of each
//! (its *dominant* share, as in dominant resource fairness): counting slots alone, a lane of
//! short requests could take most of the calls while holding few slots.

/// The state the decision needs, per lane.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LaneLoad {
    /// Guaranteed share of the limit (0..=1).
    pub share: f64,
    /// Requests of this lane in flight.
    pub inflight: usize,
    /// Requests of this lane waiting.
    pub waiting: usize,
    /// This lane's part of the calls granted lately (0 to 1).
    pub recent: f64,
}

/// The slots a lane is guaranteed under a total `limit`: `ceil(limit × share)`, at least one
/// for a lane with any share.
pub fn guaranteed(limit: usize, share: f64) -> usize {
    if share <= 0.0 {
        return 0;
    }
    ((limit as f64 * share).ceil() as usize).max(1)
}

/// The lane whose waiter gets the next free slot, if anyone waits.
pub fn next_lane(limit: usize, lanes: &[LaneLoad]) -> Option<usize> {
    lanes
        .iter()
        .enumerate()
        .filter(|(_, l)| l.waiting > 0)
        .min_by(|(i, a), (j, b)| {
            let fill = |l: &LaneLoad| {
                let g = guaranteed(limit, l.share);
                if g == 0 {
                    f64::INFINITY
                } else {
                    (l.inflight as f64 / g as f64).max(l.recent / l.share)
                }
            };
            fill(a).total_cmp(&fill(b)).then(i.cmp(j))
        })
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lane(share: f64, inflight: usize, waiting: usize) -> LaneLoad {
        LaneLoad {
            share,
            inflight,
            waiting,
            recent: 0.0,
        }
    }

    #[test]
    fn the_lane_most_below_its_share_goes_first() {
        // Limit 10: interactive is guaranteed 8, batch 2.
        let i_busy = [lane(0.8, 8, 5), lane(0.2, 0, 5)];
        assert_eq!(next_lane(10, &i_busy), Some(1), "batch has none of its two");
        let b_busy = [lane(0.8, 3, 5), lane(0.2, 2, 5)];
        assert_eq!(next_lane(10, &b_busy), Some(0));
        let tie = [lane(0.8, 4, 1), lane(0.2, 1, 1)];
        assert_eq!(next_lane(10, &tie), Some(0), "equal fill: the earlier lane");
    }

    #[test]
    fn a_lane_over_its_share_of_recent_calls_waits_even_with_few_slots() {
        // Behind a rate limit: interactive holds 40 of 64 slots (under its 80%), batch 5
        // (under its 20%); which goes next depends on their parts of the recent calls.
        for (interactive_part, batch_part, next, why) in [
            (0.8, 0.2, 0, "equal fill: the earlier lane"),
            (0.7, 0.3, 0, "batch took more than its 20% of the calls"),
            (0.95, 0.05, 1, "batch got less than its 20%"),
        ] {
            let loads = [
                LaneLoad {
                    recent: interactive_part,
                    ..lane(0.8, 40, 5)
                },
                LaneLoad {
                    recent: batch_part,
                    ..lane(0.2, 5, 5)
                },
            ];
            assert_eq!(next_lane(64, &loads), Some(next), "{why}");
        }
    }

    #[test]
    fn only_lanes_with_waiters_are_chosen() {
        assert_eq!(next_lane(10, &[lane(0.8, 0, 0), lane(0.2, 9, 3)]), Some(1));
        assert_eq!(next_lane(10, &[lane(0.8, 0, 0), lane(0.2, 0, 0)]), None);
    }

    #[test]
    fn every_lane_with_a_share_keeps_at_least_one_slot() {
        assert_eq!(guaranteed(3, 0.05), 1);
        assert_eq!(guaranteed(3, 0.0), 0);
        assert_eq!(guaranteed(10, 0.8), 8);
    }
}
