//! `[prices.MODEL]` as configuration writes it: amounts per million tokens in whole
//! currency units, read once into micro-units, and the currency they are in.

use serde::Deserialize;

use super::Price;
use crate::currency::Currency;
use crate::money::{Micros, units};

/// What a million tokens of one upstream model cost. `input` and `output` are required: a
/// price that leaves one out is refused, never zero.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PriceParams {
    /// Input tokens at full price.
    #[serde(deserialize_with = "units::deserialize")]
    pub input: Micros,
    /// Input tokens read from the prompt cache (default: `input`).
    #[serde(default, deserialize_with = "units::option")]
    pub cached_input: Option<Micros>,
    /// Input tokens written to the prompt cache (default: `input`).
    #[serde(default, deserialize_with = "units::option")]
    pub cache_write: Option<Micros>,
    /// Output tokens.
    #[serde(deserialize_with = "units::deserialize")]
    pub output: Micros,
    /// The currency the amounts are in (default: the billing currency).
    #[serde(default)]
    pub currency: Option<Currency>,
}

impl PriceParams {
    /// The price, in the currency it is written in: cached input and cache writes at the
    /// input price when it gives none.
    pub fn price(&self) -> Price {
        Price {
            input: self.input,
            cached_input: self.cached_input.unwrap_or(self.input),
            cache_write: self.cache_write.unwrap_or(self.input),
            output: self.output,
            published: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_price_reads_whole_units_and_fills_the_cache_prices_from_input() {
        let p: PriceParams =
            serde_json::from_str(r#"{"input": 2, "output": 8.5, "currency": "cny"}"#).unwrap();
        assert_eq!(p.currency, Some(Currency::CNY));
        let price = p.price();
        assert_eq!(price.input, Micros(2_000_000));
        assert_eq!(price.cached_input, Micros(2_000_000));
        assert_eq!(price.cache_write, Micros(2_000_000));
        assert_eq!(price.output, Micros(8_500_000));
        let cached: PriceParams =
            serde_json::from_str(r#"{"input": 2, "cached_input": 0.5, "output": 8}"#).unwrap();
        assert_eq!(cached.price().cached_input, Micros(500_000));
        let missing = serde_json::from_str::<PriceParams>(r#"{"input": 2}"#).unwrap_err();
        assert!(missing.to_string().contains("output"), "{missing}");
    }
}
