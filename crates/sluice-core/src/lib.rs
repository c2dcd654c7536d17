//! Domain types shared by every sluice crate: ids, token usage, error kinds and the call record.
//!
//! This crate depends on no other sluice crate and holds no policy: it names things.

pub mod budget;
pub mod calendar;
pub mod chat;
pub mod error;
pub mod ids;
pub mod prefix;
pub mod ratelimit;
pub mod record;
pub mod reply;
pub mod trace;
pub mod usage;

pub use chat::{ChatRequest, DEFAULT_OUTPUT_ESTIMATE, Original};
pub use error::{ErrorKind, GatewayError, UpstreamReply};
pub use ids::RequestId;
pub use ratelimit::{Quota, RateLimits};
pub use record::{
    AnswerFlaw, Attempt, AttemptKind, AttemptOutcome, AutoChoice, CacheLookup, CallRecord,
    CandidateEstimate, FallbackTaken, Phase, ResponseMeta, Round, RouteTaken, SemanticLookup,
    Stage, Timings,
};
pub use trace::{Marks, TraceIds};
pub use usage::Usage;
