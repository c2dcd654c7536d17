//! The catalog a configuration describes: the currency it bills in and the rates into it,
//! the shipped prices with `[prices]` over them (each in its own currency), and what
//! `[catalog]` says of each model.

use sluice_config::gateway::GatewayConfig;
use sluice_economy::{Catalog, Currency, Rate};

use super::{BuildError, GatewayBuilder};

/// The catalog of `cfg`.
pub fn from_config(cfg: &GatewayConfig) -> Result<Catalog, BuildError> {
    let billing = cfg.billing.currency;
    let rates = cfg
        .billing
        .rates
        .iter()
        .map(|(code, units)| {
            let rate = Rate::from_units(*units).ok_or_else(|| {
                BuildError::Billing(format!("rates.{code}: {units} is not a rate"))
            })?;
            Ok((*code, rate))
        })
        .collect::<Result<Vec<_>, BuildError>>()?;
    let mut catalog = Catalog::billed_in(billing, &rates);
    for (model, p) in &cfg.prices {
        if !catalog.set_in(model, p.currency.unwrap_or(billing), p.price()) {
            return Err(BuildError::Billing(format!(
                "prices.{model}: no rate for its currency"
            )));
        }
    }
    for (model, c) in &cfg.catalog {
        if !catalog.set_info(model, c) {
            return Err(BuildError::Catalog {
                model: model.clone(),
            });
        }
    }
    Ok(catalog)
}

/// The deployments of `cfg` whose model is priced only in a currency with no rate (so left
/// unpriced), each with that currency: what `config check` warns of.
pub fn unconverted(cfg: &GatewayConfig, catalog: &Catalog) -> Vec<(String, String, Currency)> {
    let mut out = Vec::new();
    for (group, m) in &cfg.models {
        for d in &m.deployments {
            if let Some(c) = catalog.unconverted(&d.model) {
                out.push((group.clone(), d.model.clone(), c));
            }
        }
    }
    out
}

impl GatewayBuilder {
    /// Replaces the catalog (prices, the billing currency and its rates, what models can
    /// take): set it before [`GatewayBuilder::price`] and [`GatewayBuilder::model_info`],
    /// which change it.
    pub fn catalog(mut self, catalog: Catalog) -> Self {
        self.catalog = catalog;
        self
    }
}
