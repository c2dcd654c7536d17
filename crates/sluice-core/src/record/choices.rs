//! What was chosen for a call, as its record keeps it: the task route and the automatic
//! router's choice with the estimates it weighed, the fallbacks taken, progressive loading's
//! rounds.

use std::sync::Arc;

/// What a task route decided for a call.
#[derive(Clone, Debug, PartialEq)]
pub struct RouteTaken {
    /// The route (the model name the client sent).
    pub route: Arc<str>,
    /// The rule that fired (its name, or `default`).
    pub rule: Arc<str>,
    /// The group it chose.
    pub group: Arc<str>,
    /// The request declared a task no rule of the route names.
    pub unknown_task: bool,
    /// When the route is an automatic router: what it weighed.
    pub auto: Option<Box<AutoChoice>>,
}

/// What an automatic router weighed for a call, and what it will learn from.
#[derive(Clone, Debug, PartialEq)]
pub struct AutoChoice {
    /// The task as learnt (`default` for none).
    pub task: Arc<str>,
    /// Why the winner won: `cheapest_clearing_floor`, `explore`, `revisit` or
    /// `none_clears_floor`.
    pub why: &'static str,
    /// The quality floor.
    pub floor: f64,
    /// The budget mode's worth of a good answer in USD (`None`: the floor mode).
    pub good_answer_value: Option<f64>,
    /// Every candidate as estimated, in configured order.
    pub candidates: Vec<CandidateEstimate>,
    /// The request asked for JSON (`response_format`): an answer that is not is a bad one.
    pub wants_json: bool,
}

/// One candidate as an automatic router estimated it.
#[derive(Clone, Debug, PartialEq)]
pub struct CandidateEstimate {
    /// The candidate group.
    pub group: Arc<str>,
    /// Posterior mean of a good answer.
    pub mean: f64,
    /// Its lower credible bound.
    pub lower: f64,
    /// Expected cost in USD (`None`: its model has no price).
    pub cost: Option<f64>,
    /// Its observed P95 first byte fits the time left.
    pub fits: bool,
    /// It could take the call.
    pub available: bool,
}

/// One round of progressive loading: a call to the upstream with more of the document.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Round {
    /// Its usage as the upstream reported it (summed into the call's usage, and billed).
    pub usage: Option<crate::Usage>,
    /// Whether its answer said the context did not suffice.
    pub insufficient: bool,
}

/// A fallback a call took: from which group to which, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FallbackTaken {
    /// The group that could not take it.
    pub from: Arc<str>,
    /// The group that took it next.
    pub to: Arc<str>,
    /// Why: `unavailable`, `quota`, `context_window`, `context_length`, `upstream_failed`
    /// or `rate_limited`.
    pub reason: &'static str,
    /// How many attempts the call had made when it took the fallback.
    pub after: usize,
}
