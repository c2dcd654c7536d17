//! Tests of `prices`.

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
    assert_eq!(c.price("glm-4-plus"), None);
    let mine = Price {
        input: Micros(1),
        ..Price::default()
    };
    c.set("glm-4.5-air", mine);
    assert_eq!(c.price("glm-4.5-air"), Some(&mine));
}

#[test]
fn a_price_in_another_currency_is_converted_at_its_rate_and_never_one_for_one() {
    // Billed in dollars with no rate: the yuan prices are left unpriced, and say why.
    let usd = Catalog::with_defaults();
    assert_eq!(usd.price("glm-5.3"), None);
    assert_eq!(usd.unconverted("glm-5.3"), Some(Currency::CNY));
    assert_eq!(usd.unconverted("glm-5.3-0801"), Some(Currency::CNY));
    assert_eq!(usd.unconverted("gpt-4o"), None);
    assert_eq!(usd.published("glm-5.3").unwrap().1.input, Micros(8_000_000));
    // At 0.14 dollars a yuan: 8 yuan a million input tokens is 1.12 dollars.
    let rates = [(Currency::CNY, Rate::from_units(0.14).unwrap())];
    let c = Catalog::billed_in(Currency::USD, &rates);
    let glm = c.price("glm-5.3").unwrap();
    assert_eq!(glm.input, Micros(1_120_000));
    assert_eq!(glm.cached_input, Micros(280_000));
    assert_eq!(glm.output, Micros(3_920_000));
    let published = glm.published.unwrap();
    assert_eq!(published.currency, Currency::CNY);
    let u = usage(1_000_000, 0, 0, 100_000);
    // 8 + 2.8 yuan, billed as 1.12 + 0.392 dollars.
    assert_eq!(published.cost(&u), Micros(10_800_000));
    assert_eq!(glm.cost(&u), Micros(1_512_000));
    // A dollar price stays as it is, with nothing published apart.
    assert_eq!(c.price("gpt-4o").unwrap().published, None);
    // Billed in yuan: the dollar prices need a rate too.
    let cny = Catalog::billed_in(Currency::CNY, &[]);
    assert_eq!(cny.price("glm-5.3").unwrap().input, Micros(8_000_000));
    assert_eq!(cny.price("gpt-4o"), None);
    assert_eq!(cny.unconverted("gpt-4o"), Some(Currency::USD));
    let cny = Catalog::billed_in(
        Currency::CNY,
        &[(Currency::USD, Rate::from_units(7.1).unwrap())],
    );
    assert_eq!(cny.price("gpt-4o-mini").unwrap().input, Micros(1_065_000));
    // An override in another currency, set after the defaults.
    let mut c = Catalog::billed_in(Currency::USD, &rates);
    let ten = Price {
        input: Micros(10_000_000),
        output: Micros(10_000_000),
        ..Price::default()
    };
    assert!(c.set_in("hunyuan-turbos-latest", Currency::CNY, ten));
    assert_eq!(
        c.price("hunyuan-turbos-latest").unwrap().input,
        Micros(1_400_000)
    );
    assert!(!c.set_in("hunyuan-t1-latest", Currency::parse("JPY").unwrap(), ten));
    assert_eq!(c.price("hunyuan-t1-latest"), None);
}

#[test]
fn the_four_providers_of_the_second_platform_are_priced() {
    let rates = [(Currency::CNY, Rate::from_units(0.14).unwrap())];
    let c = Catalog::billed_in(Currency::USD, &rates);
    for model in ["glm-5.3", "glm-4.6", "kimi-k3", "MiniMax-M3", "hy4"] {
        let p = c.price(model).unwrap_or_else(|| panic!("{model}"));
        assert!(p.input.0 > 0 && p.output.0 > p.input.0, "{model}");
        assert!(p.cached_input <= p.input, "{model}");
        assert!(c.info(model).is_some(), "{model} is described too");
    }
}
