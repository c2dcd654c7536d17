//! Money in configuration: an amount written in whole units (`0.27`) arrives as integer
//! micro-units (270,000), converted once, here, when the file is read; a negative, non-finite
//! or absurd amount is an error at its key, never a zero.

use serde::{Deserialize, Deserializer, de};

/// The largest amount accepted, in whole units.
const MAX_UNITS: f64 = 1.0e12;

/// An amount of money in micro-units (a millionth of the unit prices and credits are in).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Money(pub u64);

impl Money {
    /// The micro-units of `units` whole units, rounded to the nearest; `None` for a negative,
    /// non-finite or absurd amount.
    pub fn from_units(units: f64) -> Option<Self> {
        if !(units.is_finite() && (0.0..=MAX_UNITS).contains(&units)) {
            return None;
        }
        Some(Self((units * 1e6).round() as u64))
    }
}

impl<'de> Deserialize<'de> for Money {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let units = f64::deserialize(d)?;
        Self::from_units(units).ok_or_else(|| {
            de::Error::custom(format!(
                "must be an amount of 0 or more (at most {MAX_UNITS:e}), got {units}"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_become_micro_units_once_and_bad_ones_are_refused() {
        assert_eq!(Money::from_units(0.27), Some(Money(270_000)));
        assert_eq!(Money::from_units(0.0), Some(Money(0)));
        assert_eq!(Money::from_units(-1.0), None);
        assert_eq!(Money::from_units(f64::NAN), None);
        assert_eq!(Money::from_units(1e13), None);
        let v = Money::deserialize(toml::Value::Float(-5.0));
        assert!(v.unwrap_err().to_string().contains("0 or more"));
        let v = Money::deserialize(toml::Value::Integer(2)).unwrap();
        assert_eq!(v, Money(2_000_000));
    }
}
