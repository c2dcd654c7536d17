//! Currencies and the rates between them: a price carries the currency its provider bills
//! in, the gateway bills tenants in one currency (`[billing] currency`), and a price in
//! another is converted at a configured rate (`[billing] rates`), never at a silent 1:1.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

use crate::money::Micros;

/// An ISO 4217 code: three ASCII capitals (`USD`, `CNY`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Currency([u8; 3]);

/// A currency code that is not three ASCII letters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a currency code; write three letters, such as USD or CNY")]
pub struct BadCurrency(pub String);

impl Currency {
    /// US dollars.
    pub const USD: Self = Self(*b"USD");
    /// Chinese yuan (renminbi).
    pub const CNY: Self = Self(*b"CNY");

    /// The code `s` names, in any case (`cny` is `CNY`).
    pub fn parse(s: &str) -> Result<Self, BadCurrency> {
        match s.as_bytes() {
            [a, b, c] if s.bytes().all(|b| b.is_ascii_alphabetic()) => Ok(Self([
                a.to_ascii_uppercase(),
                b.to_ascii_uppercase(),
                c.to_ascii_uppercase(),
            ])),
            _ => Err(BadCurrency(s.to_string())),
        }
    }

    /// The code.
    pub fn as_str(&self) -> &str {
        // Built only from ASCII letters.
        std::str::from_utf8(&self.0).unwrap_or("???")
    }
}

impl Default for Currency {
    fn default() -> Self {
        Self::USD
    }
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Currency {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// Read from its code in any case (configuration's `currency = "cny"`).
impl<'de> Deserialize<'de> for Currency {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse(&s).map_err(de::Error::custom)
    }
}

/// How many units of the billing currency one unit of another is worth, kept in billionths
/// so that conversion is integer arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Rate(u64);

/// Billionths in a unit.
const BILLION: u128 = 1_000_000_000;

impl Rate {
    /// One for one (a price already in the billing currency).
    pub const ONE: Self = Self(1_000_000_000);

    /// The rate `units` writes (`0.14`); `None` unless it is finite, above zero and below a
    /// million.
    pub fn from_units(units: f64) -> Option<Self> {
        let billionths = (units * 1e9).round();
        (units.is_finite() && units > 0.0 && units < 1e6 && billionths >= 1.0)
            .then_some(Self(billionths as u64))
    }

    /// The rate as a decimal number.
    pub fn as_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// `amount` converted, rounded to the nearest micro-unit.
    pub fn convert(self, amount: Micros) -> Micros {
        let v = (u128::from(amount.0) * u128::from(self.0) + BILLION / 2) / BILLION;
        Micros(u64::try_from(v).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_three_letters_in_capitals() {
        assert_eq!(Currency::parse("cny"), Ok(Currency::CNY));
        assert_eq!(Currency::parse("USD").unwrap().to_string(), "USD");
        assert!(Currency::parse("US").is_err());
        assert!(Currency::parse("U$D").is_err());
        assert!(Currency::parse("元元元").is_err());
        assert_eq!(serde_json::to_string(&Currency::CNY).unwrap(), "\"CNY\"");
        let read: Currency = serde_json::from_str("\"cny\"").unwrap();
        assert_eq!(read, Currency::CNY);
        let bad = serde_json::from_str::<Currency>("\"US\"").unwrap_err();
        assert!(bad.to_string().contains("three letters"), "{bad}");
    }

    #[test]
    fn rates_convert_exactly_and_refuse_nonsense() {
        let cny = Rate::from_units(0.14).unwrap();
        // 8 yuan at 0.14 is 1.12 dollars.
        assert_eq!(cny.convert(Micros(8_000_000)), Micros(1_120_000));
        assert_eq!(Rate::ONE.convert(Micros(123)), Micros(123));
        assert_eq!(Rate::from_units(7.1).unwrap().convert(Micros(1)), Micros(7));
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e7, 1e-12] {
            assert_eq!(Rate::from_units(bad), None, "{bad}");
        }
    }
}
