//! An open-loop load generator: requests leave at their scheduled times whatever the answers
//! do (Poisson arrivals plus bursts), and latency is measured from the scheduled time, so a
//! slow server cannot hide its tail by slowing the client down (coordinated omission).

pub mod drive;
pub mod record;
pub mod retrying;
pub mod target;
pub mod workload;

pub use drive::{Progress, Ran, drive};
pub use record::{Answered, LaneSummary, Recorder, Summary};
pub use retrying::{Retrying, SDK_RETRIES};
pub use target::{HttpTarget, RouterTarget, Target};
pub use workload::{Burst, Planned, Questions, Shape, Traffic, Workload};
