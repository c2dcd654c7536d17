//! `[billing]` against `[prices]`: rates that are numbers a conversion can use, and no price
//! in a currency the gateway has no rate for (it would otherwise be billed one for one).

use crate::diagnostic::Diagnostic;
use crate::document::{Document, Seg};

use super::{BillingConfig, PriceConfig};

/// The largest rate accepted: no currency is worth a million of another.
const MAX_RATE: f64 = 1e6;

/// Checks the rates, and each price's currency against them.
pub(super) fn check(
    doc: &Document<'_>,
    billing: &BillingConfig,
    prices: &[(String, PriceConfig)],
    diags: &mut Vec<Diagnostic>,
) {
    let at = |parts: &[&str]| -> Vec<Seg> { parts.iter().map(|p| Seg::Key((*p).into())).collect() };
    for (code, rate) in &billing.rates {
        let path = at(&["billing", "rates", code.as_str()]);
        if !(rate.is_finite() && *rate > 0.0 && *rate < MAX_RATE) {
            diags.push(doc.diag(
                &path,
                format!(
                    "must be what one {code} is worth in {}, above 0 and below {MAX_RATE:e}",
                    billing.currency
                ),
            ));
        } else if *code == billing.currency && *rate != 1.0 {
            diags.push(doc.diag(
                &path,
                format!("{code} is the billing currency: its rate is 1; remove it"),
            ));
        }
    }
    for (model, p) in prices {
        let Some(currency) = &p.currency else {
            continue;
        };
        if *currency != billing.currency && !billing.rates.contains_key(currency) {
            diags.push(doc.diag(
                &at(&["prices", model, "currency"]),
                format!(
                    "{currency} has no rate to {billing}: add [billing] rates = {{ {currency} = N }} \
                     (what one {currency} is worth in {billing}); prices are never converted one for one",
                    billing = billing.currency
                ),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use crate::gateway::load;

    fn env(_: &[(&str, &str)]) -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    const BASE: &str = r#"
[providers.p]
kind = "openai"
base_url = "http://localhost:1/v1"
[models.a]
deployments = [{ provider = "p", model = "glm-5.3" }]
"#;

    #[test]
    fn currencies_and_rates_are_read_and_a_price_without_a_rate_is_refused() {
        let cfg = load(BASE, &env(&[]), &[]).unwrap();
        assert_eq!(cfg.billing.currency.as_str(), "USD", "the default");
        assert!(cfg.billing.rates.is_empty());
        let text = format!(
            "{BASE}[billing]\ncurrency = \"usd\"\nrates = {{ cny = 0.14 }}\n\
             [prices.\"glm-5.3\"]\ninput = 8\noutput = 28\ncurrency = \"CNY\"\n"
        );
        let cfg = load(&text, &env(&[]), &[]).unwrap();
        let (code, rate) = cfg.billing.rates.iter().next().unwrap();
        assert_eq!((code.as_str(), *rate), ("CNY", 0.14));
        assert_eq!(cfg.prices[0].1.currency.unwrap().as_str(), "CNY");
        // A yuan price with no rate: refused at the price's currency, naming the fix.
        let text =
            format!("{BASE}[prices.\"glm-5.3\"]\ninput = 8\noutput = 28\ncurrency = \"CNY\"\n");
        let err = load(&text, &env(&[]), &[]).unwrap_err();
        let d = err
            .iter()
            .find(|d| d.path == "prices.glm-5.3.currency")
            .unwrap_or_else(|| panic!("{err}"));
        assert!(d.message.contains("rates = { CNY"), "{d}");
        assert!(d.line.is_some(), "{d}");
        // Rates that cannot convert, and a rate for the billing currency itself.
        for (rates, says) in [
            ("{ CNY = 0 }", "above 0"),
            ("{ CNY = -1 }", "above 0"),
            ("{ USD = 2 }", "its rate is 1"),
        ] {
            let text = format!("{BASE}[billing]\nrates = {rates}\n");
            let err = load(&text, &env(&[]), &[]).unwrap_err();
            assert!(err.to_string().contains(says), "{rates}: {err}");
        }
        for bad in ["\"dollars\"", "\"U$D\"", "7"] {
            let text = format!("{BASE}[billing]\ncurrency = {bad}\n");
            let err = load(&text, &env(&[]), &[]).unwrap_err();
            assert!(err.to_string().contains("billing.currency"), "{bad}: {err}");
        }
    }
}
