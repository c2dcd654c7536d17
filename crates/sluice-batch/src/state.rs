//! A job's status: decided from its items' counts, its window and the clock, never kept
//! apart from them except once it has ended (so `completed_at` and the like stay put).

use crate::counts::Counts;

/// OpenAI's batch statuses (`validating` is never seen: a file is checked when uploaded and
/// a job is made valid or not at all).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Items are queued or running.
    InProgress,
    /// Cancelled by the client; items already running are finishing.
    Cancelling,
    /// Every item ended.
    Completed,
    /// Cancelled, and nothing runs any more.
    Cancelled,
    /// Its window closed before every item ran; what ran is kept (and billed).
    Expired,
}

impl Status {
    /// The status as OpenAI writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InProgress => "in_progress",
            Self::Cancelling => "cancelling",
            Self::Completed => "completed",
            Self::Cancelled => "cancelled",
            Self::Expired => "expired",
        }
    }

    /// The status a stored text names.
    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::InProgress,
            Self::Cancelling,
            Self::Completed,
            Self::Cancelled,
            Self::Expired,
        ]
        .into_iter()
        .find(|x| x.as_str() == s)
    }

    /// Whether nothing more will happen to the job.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Cancelled | Self::Expired)
    }
}

/// What a job is, once every fact is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Facts {
    /// The status it was given when it ended, if it has.
    pub ended: Option<Status>,
    /// Whether the client asked to cancel it.
    pub cancel_asked: bool,
    /// Whether its window has closed (now is at or past `expires_at`).
    pub window_closed: bool,
}

/// The job's status now.
pub fn status(facts: Facts, counts: &Counts) -> Status {
    if let Some(ended) = facts.ended {
        return ended;
    }
    let live = counts.queued + counts.running;
    match (facts.cancel_asked, live, counts.running) {
        (true, _, 0) => Status::Cancelled,
        (true, _, _) => Status::Cancelling,
        (false, 0, _) if counts.expired > 0 => Status::Expired,
        (false, 0, _) => Status::Completed,
        // A closed window with items left: in progress until the keeper has expired them,
        // so that the job ends once, with every item ended.
        _ => Status::InProgress,
    }
}

/// What the runner must do for an open job now: expire its queued items (its window
/// closed), end it (nothing is left to run), or nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Due {
    /// Nothing yet.
    Wait,
    /// Its window closed: its queued items end as expired.
    ExpireQueued,
    /// Every item ended: the job ends with this status.
    End(Status),
}

/// The step an open job is due for.
pub fn due(facts: Facts, counts: &Counts) -> Due {
    if facts.ended.is_some() {
        return Due::Wait;
    }
    // Running items may be held by a gateway that died: their lapsed claims expire too.
    if facts.window_closed && !facts.cancel_asked && counts.queued + counts.running > 0 {
        return Due::ExpireQueued;
    }
    match status(facts, counts) {
        s if s.is_terminal() => Due::End(s),
        _ => Due::Wait,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(queued: u64, running: u64, done: u64, expired: u64) -> Counts {
        Counts {
            queued,
            running,
            done,
            expired,
            ..Counts::default()
        }
    }

    const OPEN: Facts = Facts {
        ended: None,
        cancel_asked: false,
        window_closed: false,
    };

    #[test]
    fn a_job_runs_then_completes() {
        assert_eq!(status(OPEN, &counts(3, 1, 0, 0)), Status::InProgress);
        assert_eq!(due(OPEN, &counts(3, 1, 0, 0)), Due::Wait);
        assert_eq!(status(OPEN, &counts(0, 0, 4, 0)), Status::Completed);
        assert_eq!(due(OPEN, &counts(0, 0, 4, 0)), Due::End(Status::Completed));
    }

    #[test]
    fn a_cancelled_job_waits_for_its_running_items() {
        let asked = Facts {
            cancel_asked: true,
            ..OPEN
        };
        assert_eq!(status(asked, &counts(0, 2, 1, 0)), Status::Cancelling);
        assert_eq!(due(asked, &counts(0, 2, 1, 0)), Due::Wait);
        assert_eq!(due(asked, &counts(0, 0, 3, 0)), Due::End(Status::Cancelled));
    }

    #[test]
    fn a_closed_window_expires_what_is_queued_and_keeps_what_ran() {
        let closed = Facts {
            window_closed: true,
            ..OPEN
        };
        assert_eq!(due(closed, &counts(5, 1, 2, 0)), Due::ExpireQueued);
        assert_eq!(status(closed, &counts(5, 0, 2, 0)), Status::InProgress);
        assert_eq!(status(closed, &counts(0, 1, 2, 5)), Status::InProgress);
        assert_eq!(due(closed, &counts(0, 0, 3, 5)), Due::End(Status::Expired));
        // Every item ran before the window closed: completed.
        assert_eq!(
            due(closed, &counts(0, 0, 8, 0)),
            Due::End(Status::Completed)
        );
    }

    #[test]
    fn an_ended_job_stays_as_it_ended() {
        let ended = Facts {
            ended: Some(Status::Completed),
            ..OPEN
        };
        assert_eq!(status(ended, &counts(0, 0, 1, 0)), Status::Completed);
        assert_eq!(due(ended, &counts(0, 0, 1, 0)), Due::Wait);
        for s in [
            "in_progress",
            "cancelling",
            "completed",
            "cancelled",
            "expired",
        ] {
            assert_eq!(Status::parse(s).map(Status::as_str), Some(s));
        }
    }
}
