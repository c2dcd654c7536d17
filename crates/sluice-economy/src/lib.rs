//! The token economy's own types: money in integer micro-units, the model catalog (prices
//! that turn a call's usage into cost, context windows and capabilities), API keys (hashed, each owned by a tenant), and tenants' credits
//! and quotas (reserve before a call, settle after).

pub mod accounts;
pub mod book;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
pub mod currency;
pub mod estimate;
pub mod hold;
pub mod keys;
pub mod models;
pub mod money;
pub mod prices;
pub mod tenants;

pub use accounts::{Accounts, Balance, Limits, Refusal, Reservation, Standing};
pub use book::{AccountBook, Books, HoldRows, SpentUnder};
pub use currency::{BadCurrency, Currency, Rate};
pub use keys::{ApiKey, KeyDirectory, KeyError, KeyRing, KeySpec};
pub use models::{InfoOverride, ModelInfo};
pub use money::Micros;
pub use prices::{Catalog, Price, PriceParams, Published, Unpriced};
pub use tenants::{LocalTenants, TenantDirectory};
