//! The token economy's own types: money in integer micro-units, the price catalog that turns
//! a call's usage into cost, and API keys (hashed, each owned by a tenant).

pub mod keys;
pub mod money;
pub mod prices;

pub use keys::{ApiKey, KeyError, KeyRing, KeySpec};
pub use money::Micros;
pub use prices::{Catalog, Price};
