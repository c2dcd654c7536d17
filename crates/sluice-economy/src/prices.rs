//! The price catalog: per model, what a million tokens cost, input at full price, input read
//! from the provider's prompt cache, input written to it, and output, in the currency its
//! provider bills; and each converted into the currency the gateway bills in. A call's cost
//! is its usage priced here, in integer micro-units.

use hashbrown::HashMap;

use serde::Serialize;
use sluice_core::Usage;

use crate::currency::{Currency, Rate};
use crate::models::{InfoOverride, ModelInfo};
use crate::money::Micros;

mod params;

pub use params::PriceParams;

/// What a million tokens of each kind cost, in the currency the gateway bills in.
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
    /// The price as its provider bills it, when that is in another currency (the fields
    /// above are it converted at the configured rate).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub published: Option<Published>,
}

/// A price in the currency its provider bills in, per million tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Published {
    /// The provider's currency.
    pub currency: Currency,
    /// Input tokens at full price.
    pub input: Micros,
    /// Input tokens read from the provider's prompt cache.
    pub cached_input: Micros,
    /// Input tokens written to the provider's prompt cache.
    pub cache_write: Micros,
    /// Output tokens.
    pub output: Micros,
}

impl Published {
    /// What `usage` costs in the provider's currency.
    pub fn cost(&self, usage: &Usage) -> Micros {
        Price {
            input: self.input,
            cached_input: self.cached_input,
            cache_write: self.cache_write,
            output: self.output,
            published: None,
        }
        .cost(usage)
    }
}

/// How many times the input price a write kept an hour costs (Anthropic's 1-hour time to
/// live; its 5-minute write is the model's `cache_write`).
pub const LONG_WRITE_FACTOR: u64 = 2;

impl Price {
    /// The four prices, each converted at `rate`, with `currency` and the unconverted
    /// prices kept as what was published.
    pub fn converted(&self, currency: Currency, rate: Rate) -> Self {
        Self {
            input: rate.convert(self.input),
            cached_input: rate.convert(self.cached_input),
            cache_write: rate.convert(self.cache_write),
            output: rate.convert(self.output),
            published: Some(Published {
                currency,
                input: self.input,
                cached_input: self.cached_input,
                cache_write: self.cache_write,
                output: self.output,
            }),
        }
    }

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

/// What a call to a model with no price gets (`[billing] unpriced`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unpriced {
    /// Refused for a tenant who pays by credits or a spend quota (served, and counted, for
    /// everyone else).
    #[default]
    Refuse,
    /// Served at no charge, and counted.
    Free,
}

/// What a million tokens cost, as each provider publishes it, in the currency it bills in;
/// override in `[prices.MODEL]`. A price in another currency than `[billing] currency` is
/// converted at `[billing] rates`; without a rate its model is left unpriced (and follows
/// `[billing] unpriced`), never converted 1:1.
const DEFAULTS: &[(&str, Currency, u64, u64, u64, u64)] = &[
    // model, currency, input, cached input, cache write, output: micro-units per million
    // tokens. A provider that publishes no cached-input or cache-write price bills them as
    // input.
    ("gpt-4.1", USD, 2_000_000, 500_000, 2_000_000, 8_000_000),
    ("gpt-4.1-mini", USD, 400_000, 100_000, 400_000, 1_600_000),
    ("gpt-4o", USD, 2_500_000, 1_250_000, 2_500_000, 10_000_000),
    ("gpt-4o-mini", USD, 150_000, 75_000, 150_000, 600_000),
    (
        "claude-opus-4-1",
        USD,
        15_000_000,
        1_500_000,
        18_750_000,
        75_000_000,
    ),
    (
        "claude-sonnet-4-5",
        USD,
        3_000_000,
        300_000,
        3_750_000,
        15_000_000,
    ),
    (
        "claude-haiku-4-5",
        USD,
        1_000_000,
        100_000,
        1_250_000,
        5_000_000,
    ),
    ("deepseek-chat", USD, 270_000, 70_000, 270_000, 1_100_000),
    (
        "deepseek-reasoner",
        USD,
        550_000,
        140_000,
        550_000,
        2_190_000,
    ),
    // The prices below are those of the price table in the `litellm` 1.110.2 package on PyPI
    // (model_prices_and_context_window_backup.json, read 2026-12-03), each from the source
    // page that table names.
    //
    // Zhipu GLM on open.bigmodel.cn, billed in yuan (docs.bigmodel.cn/cn/guide/start/pricing).
    // The table holds them in dollars at 7 yuan to the dollar (glm-5.3's input is 8/7); the
    // yuan here are those times 7, whole fen every one.
    ("glm-5.3", CNY, 8_000_000, 2_000_000, 8_000_000, 28_000_000),
    (
        "glm-5.3-flashx",
        CNY,
        2_000_000,
        570_000,
        2_000_000,
        7_000_000,
    ),
    ("glm-5.3-flash", CNY, 800_000, 230_000, 800_000, 2_800_000),
    // Zhipu GLM on Z.ai, billed in dollars (docs.z.ai/guides/overview/pricing).
    ("glm-4.6", USD, 600_000, 110_000, 600_000, 2_200_000),
    ("glm-4.5", USD, 600_000, 600_000, 600_000, 2_200_000),
    ("glm-4.5-air", USD, 200_000, 200_000, 200_000, 1_100_000),
    // Moonshot Kimi on platform.kimi.ai, billed in dollars (platform.kimi.ai/docs/pricing/
    // chat-k3 and chat-k26; platform.moonshot.ai/docs/pricing for moonshot-v1).
    ("kimi-k3", USD, 3_000_000, 300_000, 3_000_000, 15_000_000),
    ("kimi-k2.6", USD, 950_000, 160_000, 950_000, 4_000_000),
    (
        "moonshot-v1-32k",
        USD,
        1_000_000,
        1_000_000,
        1_000_000,
        3_000_000,
    ),
    (
        "moonshot-v1-128k",
        USD,
        2_000_000,
        2_000_000,
        2_000_000,
        5_000_000,
    ),
    // MiniMax on platform.minimax.io, billed in dollars (its pay-as-you-go pricing guide).
    ("MiniMax-M3", USD, 300_000, 60_000, 300_000, 1_200_000),
    ("MiniMax-M2", USD, 300_000, 30_000, 375_000, 1_200_000),
    // Tencent Hunyuan on Tencent Cloud's international site, billed in dollars
    // (tencentcloud.com/document/product/1300/78937).
    ("hy4", USD, 834_000, 42_000, 834_000, 2_501_000),
    // Google Gemini on the Gemini API (ai.google.dev/gemini-api/docs/pricing), billed in
    // dollars; an implicit cache write costs the input price. The Pro models are left
    // unpriced: a prompt over 200,000 tokens costs twice as much there, which one price a
    // million tokens cannot say (write `[prices.gemini-2.5-pro]` to price them).
    ("gemini-2.5-flash", USD, 300_000, 30_000, 300_000, 2_500_000),
    (
        "gemini-2.5-flash-lite",
        USD,
        100_000,
        10_000,
        100_000,
        400_000,
    ),
    (
        "gemini-3-flash-preview",
        USD,
        500_000,
        50_000,
        500_000,
        3_000_000,
    ),
    // AWS Bedrock, on-demand in its US regions, billed in dollars (the same package's table,
    // from AWS's price list); a model id with a cross-region prefix (`us.`) is priced as
    // that table prices it. Nova publishes no cache-write price: billed as input.
    (
        "amazon.nova-pro-v1:0",
        USD,
        800_000,
        200_000,
        800_000,
        3_200_000,
    ),
    (
        "amazon.nova-lite-v1:0",
        USD,
        60_000,
        15_000,
        60_000,
        240_000,
    ),
    (
        "amazon.nova-micro-v1:0",
        USD,
        35_000,
        8_750,
        35_000,
        140_000,
    ),
    (
        "anthropic.claude-sonnet-4-5-20250929-v1:0",
        USD,
        3_000_000,
        300_000,
        3_750_000,
        15_000_000,
    ),
    (
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        USD,
        3_300_000,
        330_000,
        4_125_000,
        16_500_000,
    ),
    (
        "anthropic.claude-haiku-4-5-20251001-v1:0",
        USD,
        1_000_000,
        100_000,
        1_250_000,
        5_000_000,
    ),
];

const USD: Currency = Currency::USD;
const CNY: Currency = Currency::CNY;

/// Prices, context windows and capabilities by model name, and the currency the gateway
/// bills in with the rates that convert prices into it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Catalog {
    /// Looked up twice a request: foldhash, not SipHash; the keys are configured names.
    /// In the billing currency.
    prices: HashMap<String, Price>,
    /// Every price as it was set, in its own currency (what `sluice models` shows).
    published: HashMap<String, (Currency, Price)>,
    /// What each model can take and do.
    info: HashMap<String, ModelInfo>,
    /// The currency tenants are billed in.
    billing: Currency,
    /// What a unit of each other currency is worth in the billing one.
    rates: HashMap<Currency, Rate>,
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
    /// The shipped defaults, billed in dollars with no other rate (prices in yuan are left
    /// unpriced).
    pub fn with_defaults() -> Self {
        Self::billed_in(Currency::USD, &[])
    }

    /// The shipped defaults, billed in `billing`, prices in other currencies converted at
    /// `rates` (what one unit of each is worth in `billing`).
    pub fn billed_in(billing: Currency, rates: &[(Currency, Rate)]) -> Self {
        let mut c = Self {
            billing,
            rates: rates.iter().copied().collect(),
            ..Self::default()
        };
        for &(model, currency, input, cached, write, output) in DEFAULTS {
            let price = Price {
                input: Micros(input),
                cached_input: Micros(cached),
                cache_write: Micros(write),
                output: Micros(output),
                published: None,
            };
            c.set_in(model, currency, price);
        }
        for (model, info) in crate::models::shipped() {
            c.info.insert(model.to_string(), info);
        }
        c
    }

    /// The currency tenants are billed in.
    pub fn billing(&self) -> Currency {
        self.billing
    }

    /// What a unit of `currency` is worth in the billing currency; `None` when no rate is
    /// configured for it.
    pub fn rate(&self, currency: Currency) -> Option<Rate> {
        if currency == self.billing {
            return Some(Rate::ONE);
        }
        self.rates.get(&currency).copied()
    }

    /// Sets (or overrides) the price of `model`, given in the billing currency.
    pub fn set(&mut self, model: &str, price: Price) {
        let billing = self.billing;
        self.set_in(model, billing, price);
    }

    /// Sets (or overrides) the price of `model`, given in `currency`: converted into the
    /// billing currency at its rate; with no rate for it, the model is left unpriced and
    /// false is returned.
    pub fn set_in(&mut self, model: &str, currency: Currency, price: Price) -> bool {
        let price = Price {
            published: None,
            ..price
        };
        self.published.insert(model.to_string(), (currency, price));
        match self.rate(currency) {
            Some(_) if currency == self.billing => {
                self.prices.insert(model.to_string(), price);
                true
            }
            Some(rate) => {
                self.prices
                    .insert(model.to_string(), price.converted(currency, rate));
                true
            }
            None => {
                self.prices.remove(model);
                false
            }
        }
    }

    /// The currency of `model`'s price when it has one that cannot be converted (no rate
    /// for its currency), found as [`Catalog::price`] finds prices.
    pub fn unconverted(&self, model: &str) -> Option<Currency> {
        if self.price(model).is_some() {
            return None;
        }
        lookup(&self.published, model).map(|(c, _)| *c)
    }

    /// The price of `model` as it was set, in its own currency.
    pub fn published(&self, model: &str) -> Option<(Currency, &Price)> {
        lookup(&self.published, model).map(|(c, p)| (*c, p))
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
            .published
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
mod tests;
