//! What a call is held at before it leaves: its worst case (its prompt, counted, plus its
//! `max_tokens`, or the default answer length) at its deployment's full price, or nothing,
//! or a refusal when the model has no price and the tenant pays in money.

use sluice_core::Usage;

use crate::{Limits, Micros, Price, Unpriced};

/// The worst case of a call of `prompt` tokens that may answer `output`.
pub fn worst_case(prompt: u64, output: u64) -> Usage {
    Usage {
        prompt_tokens: prompt,
        completion_tokens: output,
        ..Usage::default()
    }
}

/// What a call whose worst case is `worst` is held at, for a tenant with `limits`, on a
/// model priced `price` (`None`: unpriced) under the `unpriced` policy. `None` means
/// refuse: the model has no price, the tenant pays by credits or a spend quota, and
/// unpriced calls are refused. A tenant who pays in tokens or requests only is held at
/// nothing on an unpriced model (its quotas count the tokens), as everyone is under
/// `unpriced = "free"`.
pub fn held_at(
    price: Option<&Price>,
    unpriced: Unpriced,
    limits: &Limits,
    worst: &Usage,
) -> Option<Micros> {
    let pays_money = limits.credits.is_some() || limits.spend_per_month.is_some();
    match (price, unpriced) {
        (Some(p), _) => Some(p.cost(worst)),
        (None, _) if !pays_money => Some(Micros::ZERO),
        (None, Unpriced::Free) => Some(Micros::ZERO),
        (None, Unpriced::Refuse) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PRICE: Price = Price {
        input: Micros(2_000_000),
        cached_input: Micros(500_000),
        cache_write: Micros(2_000_000),
        output: Micros(8_000_000),
        published: None,
    };

    #[test]
    fn a_priced_call_is_held_at_its_worst_case_and_an_unpriced_one_by_the_policy() {
        let worst = worst_case(1_000, 256);
        let credits = Limits {
            credits: Some(Micros(1)),
            ..Limits::default()
        };
        let tokens_only = Limits {
            tpm: Some(1_000),
            ..Limits::default()
        };
        let monthly = Limits {
            spend_per_month: Some(Micros(1)),
            ..Limits::default()
        };
        // 1,000 in at $2/M and 256 out at $8/M.
        let cost = Micros(2_000 + 2_048);
        assert_eq!(
            held_at(Some(&PRICE), Unpriced::Refuse, &credits, &worst),
            Some(cost)
        );
        assert_eq!(held_at(None, Unpriced::Refuse, &credits, &worst), None);
        assert_eq!(held_at(None, Unpriced::Refuse, &monthly, &worst), None);
        assert_eq!(
            held_at(None, Unpriced::Refuse, &tokens_only, &worst),
            Some(Micros::ZERO)
        );
        assert_eq!(
            held_at(None, Unpriced::Free, &credits, &worst),
            Some(Micros::ZERO)
        );
    }
}
