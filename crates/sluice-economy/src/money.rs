//! Money as an integer count of micro-units (a millionth of a dollar, or of whatever currency
//! the catalog is priced in): sums are exact and never drift, as floating point would.

use std::fmt;
use std::ops::{Add, AddAssign};

use serde::{Deserialize, Serialize};

/// An amount of money in micro-units.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Micros(pub u64);

impl Micros {
    /// Zero.
    pub const ZERO: Self = Self(0);

    /// The micro-units of a decimal amount written in whole units (`0.27` → 270,000), rounded
    /// to the nearest micro-unit; `None` for a negative, non-finite or absurd amount. Prices
    /// are read once from configuration this way; every sum after is integer.
    pub fn from_units(units: f64) -> Option<Self> {
        let micros = (units * 1e6).round();
        (micros.is_finite() && (0.0..=9.0e18).contains(&micros)).then_some(Self(micros as u64))
    }

    /// The sum, saturating instead of overflowing.
    pub fn saturating_add(self, other: Self) -> Self {
        Self(self.0.saturating_add(other.0))
    }
}

impl Add for Micros {
    type Output = Self;
    fn add(self, other: Self) -> Self {
        self.saturating_add(other)
    }
}

impl AddAssign for Micros {
    fn add_assign(&mut self, other: Self) {
        *self = *self + other;
    }
}

/// Amounts written in whole units in configuration (`0.27`), read once into [`Micros`]: a
/// negative, non-finite or absurd amount is an error at its key, never a zero. For
/// `#[serde(deserialize_with = "...")]` on a configured amount.
pub mod units {
    use serde::{Deserialize, Deserializer, de};

    use super::Micros;

    /// The largest amount accepted, in whole units.
    pub const MAX_UNITS: f64 = 1.0e12;

    /// The micro-units of `units` whole units, if it is an amount configuration may hold.
    pub fn read(units: f64) -> Option<Micros> {
        (units.is_finite() && (0.0..=MAX_UNITS).contains(&units))
            .then(|| Micros::from_units(units))
            .flatten()
    }

    /// An amount in whole units.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Micros, D::Error> {
        let units = f64::deserialize(d)?;
        read(units).ok_or_else(|| {
            de::Error::custom(format!(
                "must be an amount of 0 or more (at most {MAX_UNITS:e}), got {units}"
            ))
        })
    }

    /// An amount in whole units, where one may be left out.
    pub fn option<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Micros>, D::Error> {
        deserialize(d).map(Some)
    }
}

/// Whole units with six decimals: `0.000270`.
impl fmt::Display for Micros {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:06}", self.0 / 1_000_000, self.0 % 1_000_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_units_become_exact_micros() {
        assert_eq!(Micros::from_units(0.27), Some(Micros(270_000)));
        assert_eq!(Micros::from_units(15.0), Some(Micros(15_000_000)));
        assert_eq!(Micros::from_units(0.0000005), Some(Micros(1)));
        assert_eq!(Micros::from_units(-1.0), None);
        assert_eq!(Micros::from_units(f64::NAN), None);
        assert_eq!(Micros(1_234_567).to_string(), "1.234567");
        assert_eq!((Micros(u64::MAX) + Micros(1)).0, u64::MAX);
    }

    #[derive(Debug, serde::Deserialize)]
    struct Priced {
        #[serde(deserialize_with = "units::deserialize")]
        amount: Micros,
    }

    #[test]
    fn configured_amounts_are_read_in_whole_units_and_bad_ones_are_refused() {
        assert_eq!(units::read(0.27), Some(Micros(270_000)));
        assert_eq!(units::read(0.0), Some(Micros(0)));
        assert_eq!(units::read(-1.0), None);
        assert_eq!(units::read(f64::NAN), None);
        assert_eq!(units::read(1e13), None);
        let ok: Priced = serde_json::from_str(r#"{"amount": 2}"#).unwrap();
        assert_eq!(ok.amount, Micros(2_000_000));
        let bad = serde_json::from_str::<Priced>(r#"{"amount": -5.0}"#).unwrap_err();
        assert!(bad.to_string().contains("0 or more"), "{bad}");
    }
}
