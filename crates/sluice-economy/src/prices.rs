//! The price catalog: per model, what a million tokens cost, input at full price, input read
//! from the provider's prompt cache, input written to it, and output. A call's cost is its
//! usage priced here, in integer micro-units.

use hashbrown::HashMap;

use serde::Serialize;
use sluice_core::Usage;

use crate::models::{InfoOverride, ModelInfo};
use crate::money::Micros;

/// What a million tokens of each kind cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Price {
    /// Input tokens at full price.
    pub input: Micros,
    /// Input tokens read from the provider's prompt cache.
    pub cached_input: Micros,
    /// Input tokens written to the provider's prompt cache.
    pub cache_write: Micros,
    /// Output tokens.
    pub output: Micros,
}

/// How many times the input price a write kept an hour costs (Anthropic's 1-hour time to
/// live; its 5-minute write is the model's `cache_write`).
pub const LONG_WRITE_FACTOR: u64 = 2;

impl Price {
    /// What a million tokens written to be kept an hour cost.
    pub fn long_write(&self) -> Micros {
        Micros(self.input.0.saturating_mul(LONG_WRITE_FACTOR))
    }

    /// The cost of `usage`, rounded up to the next micro-unit.
    pub fn cost(&self, usage: &Usage) -> Micros {
        let long = usage.cache_write_long_tokens.min(usage.cache_write_tokens);
        let parts = [
            (usage.uncached_prompt_tokens(), self.input),
            (usage.cached_tokens, self.cached_input),
            (usage.cache_write_tokens - long, self.cache_write),
            (long, self.long_write()),
            (usage.completion_tokens, self.output),
        ];
        let per_million: u128 = parts
            .iter()
            .map(|(tokens, price)| u128::from(*tokens) * u128::from(price.0))
            .sum();
        Micros(u64::try_from(per_million.div_ceil(1_000_000)).unwrap_or(u64::MAX))
    }

    /// What the prompt cache saved on `usage`: its cached tokens at full price, less what
    /// they cost (a write premium counts against it).
    pub fn cache_saving(&self, usage: &Usage) -> i128 {
        let full = i128::from(self.input.0);
        let read = i128::from(usage.cached_tokens) * (full - i128::from(self.cached_input.0));
        let long = usage.cache_write_long_tokens.min(usage.cache_write_tokens);
        let write = i128::from(usage.cache_write_tokens - long)
            * (i128::from(self.cache_write.0) - full)
            + i128::from(long) * (i128::from(self.long_write().0) - full);
        (read - write) / 1_000_000
    }

    /// The two sides of [`Price::cache_saving`], each rounded down: what reading cached
    /// tokens saved, and what writing them cost beyond the full input price (either is 0
    /// when the cached price is not below, or the write price not above, the input's).
    pub fn cache_read_and_write(&self, usage: &Usage) -> (u64, u64) {
        let full = u128::from(self.input.0);
        let read = u128::from(usage.cached_tokens)
            * full.saturating_sub(u128::from(self.cached_input.0))
            / 1_000_000;
        let long = usage.cache_write_long_tokens.min(usage.cache_write_tokens);
        let write = (u128::from(usage.cache_write_tokens - long)
            * u128::from(self.cache_write.0).saturating_sub(full)
            + u128::from(long) * u128::from(self.long_write().0).saturating_sub(full))
            / 1_000_000;
        let narrow = |x: u128| u64::try_from(x).unwrap_or(u64::MAX);
        (narrow(read), narrow(write))
    }
}

/// What a call to a model with no price gets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Unpriced {
    /// Refused for a tenant who pays by credits or a spend quota (served, and counted, for
    /// everyone else).
    #[default]
    Refuse,
    /// Served at no charge, and counted.
    Free,
}

/// US dollars per million tokens, as the providers published them; override in
/// `[prices.MODEL]`. Models priced in other currencies (GLM, Kimi, MiniMax, Hunyuan) ship no
/// default: they are priced in `[prices.MODEL]`, or follow `[billing] unpriced`.
const DEFAULTS: &[(&str, u64, u64, u64, u64)] = &[
    // model, input, cached input, cache write, output: micro-units per million tokens
    ("gpt-4.1", 2_000_000, 500_000, 2_000_000, 8_000_000),
    ("gpt-4.1-mini", 400_000, 100_000, 400_000, 1_600_000),
    ("gpt-4o", 2_500_000, 1_250_000, 2_500_000, 10_000_000),
    ("gpt-4o-mini", 150_000, 75_000, 150_000, 600_000),
    (
        "claude-opus-4-1",
        15_000_000,
        1_500_000,
        18_750_000,
        75_000_000,
    ),
    (
        "claude-sonnet-4-5",
        3_000_000,
        300_000,
        3_750_000,
        15_000_000,
    ),
    ("claude-haiku-4-5", 1_000_000, 100_000, 1_250_000, 5_000_000),
    ("deepseek-chat", 270_000, 70_000, 270_000, 1_100_000),
    ("deepseek-reasoner", 550_000, 140_000, 550_000, 2_190_000),
];

/// Prices, context windows and capabilities by model name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Catalog {
    /// Looked up twice a request: foldhash, not SipHash; the keys are configured names.
    prices: HashMap<String, Price>,
    /// What each model can take and do.
    info: HashMap<String, ModelInfo>,
}

/// The entry of `model` in `map`: its own, else that of the longest catalogued name it
/// extends with a dash (`gpt-4o-2024-08-06` is `gpt-4o`).
fn lookup<'m, T>(map: &'m HashMap<String, T>, model: &str) -> Option<&'m T> {
    if let Some(p) = map.get(model) {
        return Some(p);
    }
    map.iter()
        .filter(|(name, _)| {
            model.len() > name.len()
                && model.starts_with(name.as_str())
                && model.as_bytes().get(name.len()) == Some(&b'-')
        })
        .max_by_key(|(name, _)| name.len())
        .map(|(_, p)| p)
}

impl Catalog {
    /// The shipped defaults.
    pub fn with_defaults() -> Self {
        let mut c = Self::default();
        for (model, input, cached, write, output) in DEFAULTS {
            c.set(
                model,
                Price {
                    input: Micros(*input),
                    cached_input: Micros(*cached),
                    cache_write: Micros(*write),
                    output: Micros(*output),
                },
            );
        }
        for (model, info) in crate::models::shipped() {
            c.info.insert(model.to_string(), info);
        }
        c
    }

    /// Sets (or overrides) the price of `model`.
    pub fn set(&mut self, model: &str, price: Price) {
        self.prices.insert(model.to_string(), price);
    }

    /// The price of `model`: its own, else that of the longest catalogued name it extends
    /// with a dash (`gpt-4o-2024-08-06` is priced as `gpt-4o`).
    pub fn price(&self, model: &str) -> Option<&Price> {
        lookup(&self.prices, model)
    }

    /// What `model` can take and do, found as [`Catalog::price`] finds prices.
    pub fn info(&self, model: &str) -> Option<&ModelInfo> {
        lookup(&self.info, model)
    }

    /// Overrides what the catalog says of `model` with the fields `o` gives; false when the
    /// model is not catalogued and `o` does not give both sizes.
    pub fn set_info(&mut self, model: &str, o: &InfoOverride) -> bool {
        match o.apply(self.info(model).copied()) {
            Some(info) => {
                self.info.insert(model.to_string(), info);
                true
            }
            None => false,
        }
    }

    /// Every model the catalog knows (priced, described, or both), by name.
    pub fn models(&self) -> Vec<(&str, Option<&Price>, Option<&ModelInfo>)> {
        let mut names: Vec<&str> = self
            .prices
            .keys()
            .chain(self.info.keys())
            .map(String::as_str)
            .collect();
        names.sort_unstable();
        names.dedup();
        names
            .into_iter()
            .map(|n| (n, self.prices.get(n), self.info.get(n)))
            .collect()
    }

    /// The cost of `usage` on `model`; `None` when the model has no price.
    pub fn cost(&self, model: &str, usage: &Usage) -> Option<Micros> {
        self.price(model).map(|p| p.cost(usage))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(prompt: u64, cached: u64, write: u64, out: u64) -> Usage {
        Usage {
            prompt_tokens: prompt,
            completion_tokens: out,
            cached_tokens: cached,
            cache_write_tokens: write,
            reasoning_tokens: 0,
            cache_write_long_tokens: 0,
        }
    }

    #[test]
    fn cached_tokens_are_billed_at_the_cached_price_not_the_full_one() {
        let c = Catalog::with_defaults();
        // deepseek-chat: 1,000,000 prompt tokens of which 800,000 cached, 100,000 out:
        // 200,000 × 0.27 + 800,000 × 0.07 + 100,000 × 1.10 per million = 0.054 + 0.056 + 0.11.
        let cost = c.cost("deepseek-chat", &usage(1_000_000, 800_000, 0, 100_000));
        assert_eq!(cost, Some(Micros(220_000)));
        // Claude: a 5-minute cache write costs 1.25x, a read 0.1x.
        let claude = c.price("claude-sonnet-4-5").unwrap();
        assert_eq!(claude.cost(&usage(1_000, 0, 1_000, 0)), Micros(3_750));
        assert_eq!(claude.cost(&usage(1_000, 1_000, 0, 0)), Micros(300));
        assert_eq!(claude.cache_saving(&usage(1_000, 1_000, 0, 0)), 2_700);
        assert_eq!(claude.cache_saving(&usage(1_000, 0, 1_000, 0)), -750);
        // A 1-hour write costs 2x: 1,000 tokens at 6.00 a million, 3,000 above the input.
        let hour = Usage {
            cache_write_long_tokens: 1_000,
            ..usage(1_000, 0, 1_000, 0)
        };
        assert_eq!(claude.cost(&hour), Micros(6_000));
        assert_eq!(claude.cache_read_and_write(&hour), (0, 3_000));
        assert_eq!(claude.cache_saving(&hour), -3_000);
        // Half of the writes long: 500 at 3.75 and 500 at 6.00.
        let half = Usage {
            cache_write_long_tokens: 500,
            ..usage(1_000, 0, 1_000, 0)
        };
        assert_eq!(claude.cost(&half), Micros(4_875));
    }

    #[test]
    fn costs_round_up_to_the_micro_unit_and_never_overflow() {
        let c = Catalog::with_defaults();
        // One output token of gpt-4o-mini: 0.6 micro-units, billed as 1.
        assert_eq!(c.cost("gpt-4o-mini", &usage(0, 0, 0, 1)), Some(Micros(1)));
        let huge = usage(u64::MAX, 0, 0, u64::MAX);
        assert!(c.cost("claude-opus-4-1", &huge).unwrap().0 > 0);
    }

    #[test]
    fn dated_model_names_take_their_familys_price_and_unknown_ones_none() {
        let mut c = Catalog::with_defaults();
        assert_eq!(c.price("gpt-4o-2024-08-06"), c.price("gpt-4o"));
        assert_eq!(c.price("gpt-4o-mini-2024-07-18"), c.price("gpt-4o-mini"));
        assert_eq!(c.price("gpt-4"), None);
        assert_eq!(c.price("glm-4.5-air"), None);
        let mine = Price {
            input: Micros(1),
            ..Price::default()
        };
        c.set("glm-4.5-air", mine);
        assert_eq!(c.price("glm-4.5-air"), Some(&mine));
    }
}
