//! A request's deadline running out: which stage used the budget, said in the record and in
//! the 504 the client gets.

use sluice_core::{AttemptOutcome, CallRecord, ErrorKind, GatewayError, Stage};
use tokio::time::{Duration, Instant};

use crate::walk::call::Call;

/// Notes in the call's record where its deadline ran out, and makes the error that says so.
pub fn exceeded(call: &mut Call) -> GatewayError {
    let stage = call.ran_out();
    error(call.record(), stage, Instant::now())
}

/// The 504 of a call whose deadline ran out at `now`, in `stage`.
pub fn error(r: &CallRecord, stage: Stage, now: Instant) -> GatewayError {
    let budget = r.timings.deadline.map_or(Duration::ZERO, |d| {
        d.saturating_duration_since(r.timings.received)
    });
    let upstreams = |pending: bool| {
        let names: Vec<&str> = r
            .attempts
            .iter()
            .filter(|a| !pending || a.outcome == AttemptOutcome::Pending)
            .map(|a| &*a.upstream)
            .collect();
        names.join(" and ")
    };
    let place = match stage {
        Stage::Queue => "while it waited in sluice's queue for an upstream slot".to_string(),
        Stage::Upstream => format!("while waiting for the first byte from {}", upstreams(true)),
        Stage::Retry => match r.attempts.last() {
            Some(a) => format!(
                "between attempts, before a retry (the last, at {}, ended {})",
                a.upstream,
                a.outcome.label()
            ),
            None => "between attempts".to_string(),
        },
        Stage::Stream => format!(
            "while streaming the answer from {}",
            r.upstream.as_deref().unwrap_or("the upstream")
        ),
    };
    let queued = r
        .timings
        .dispatched
        .unwrap_or(now)
        .saturating_duration_since(r.timings.received);
    GatewayError::new(
        ErrorKind::DeadlineExceeded,
        format!(
            "the request's deadline of {} ms ran out {place} (stage `{}`; {} ms queued, {} \
             attempt(s))",
            budget.as_millis(),
            stage.label(),
            queued.as_millis(),
            r.attempts.len(),
        ),
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use sluice_core::{Attempt, RequestId};

    use super::*;

    #[test]
    fn the_message_names_the_stage_and_the_upstream() {
        let t0 = Instant::now();
        let mut r = CallRecord::new(RequestId::from_client_or_generate(Some("d")), t0);
        r.timings.deadline = Some(t0 + Duration::from_millis(2000));
        let e = error(&r, r.stage(), t0 + Duration::from_millis(2000));
        assert_eq!((e.kind, e.status()), (ErrorKind::DeadlineExceeded, 504));
        assert!(e.message.contains("2000 ms"), "{}", e.message);
        assert!(e.message.contains("stage `queue`"), "{}", e.message);
        assert!(e.message.contains("2000 ms queued"), "{}", e.message);

        r.timings.dispatched = Some(t0 + Duration::from_millis(300));
        r.attempts.push(Attempt::start(Arc::from("alpha"), t0));
        let e = error(&r, r.stage(), t0 + Duration::from_millis(2000));
        assert!(e.message.contains("first byte from alpha"), "{}", e.message);
        assert!(e.message.contains("300 ms queued"), "{}", e.message);
    }
}
