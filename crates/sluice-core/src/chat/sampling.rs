//! Sampling parameters checked in OpenAI's ranges, the field named: a request the provider
//! would refuse is refused before it is queued or billed, as OpenAI refuses it.

use super::fields::Fields;
use super::invalid;
use crate::GatewayError;

/// One parameter's range; `whole` when it must be an integer.
struct Range {
    name: &'static str,
    min: f64,
    max: f64,
    whole: bool,
}

const fn number(name: &'static str, min: f64, max: f64) -> Range {
    Range {
        name,
        min,
        max,
        whole: false,
    }
}

const fn integer(name: &'static str, min: f64, max: f64) -> Range {
    Range {
        name,
        min,
        max,
        whole: true,
    }
}

/// OpenAI's ranges for chat completions.
const RANGES: &[Range] = &[
    number("temperature", 0.0, 2.0),
    number("top_p", 0.0, 1.0),
    number("presence_penalty", -2.0, 2.0),
    number("frequency_penalty", -2.0, 2.0),
    integer("n", 1.0, 128.0),
    integer("top_logprobs", 0.0, 20.0),
];

/// Every sampling parameter of `fields` that is set (not `null`) within its range.
pub(super) fn check(fields: &Fields) -> Result<(), GatewayError> {
    for (name, raw) in fields.iter() {
        if let Some(range) = RANGES.iter().find(|r| r.name == name) {
            range.check(raw)?;
        }
    }
    Ok(())
}

impl Range {
    fn check(&self, raw: &[u8]) -> Result<(), GatewayError> {
        if raw == b"null" {
            return Ok(());
        }
        let name = self.name;
        let kind = if self.whole { "an integer" } else { "a number" };
        let value = serde_json::from_slice::<f64>(raw)
            .ok()
            .filter(|v| !self.whole || v.fract() == 0.0)
            .ok_or_else(|| invalid(format!("`{name}` must be {kind}"), name))?;
        if value < self.min {
            return Err(invalid(
                format!("`{name}` must be at least {}, got {value}", self.min),
                name,
            ));
        }
        if value > self.max {
            return Err(invalid(
                format!("`{name}` must be at most {}, got {value}", self.max),
                name,
            ));
        }
        Ok(())
    }
}
