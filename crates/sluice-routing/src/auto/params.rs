//! `[routers.NAME]` as it is written: the candidate groups and the settings whose unset
//! values are the mode's ([`RouterPolicy::for_mode`]), with what makes them wrong.

use super::RouterPolicy;

/// `[routers.NAME]`: a model name whose group is chosen per request among `candidates` by
/// what has been learnt of each for the request's task (feedback and implicit signals): the
/// cheapest believed good enough that fits the deadline, exploring a bounded share.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouterParams {
    /// The model groups it chooses among (at least one).
    pub candidates: Vec<String>,
    /// The probability of a good answer a candidate must credibly clear (default 0.8).
    #[serde(default)]
    pub floor: Option<f64>,
    /// How credible "clears the floor" must be, in (0.5, 1) (default 0.8).
    #[serde(default)]
    pub confidence: Option<f64>,
    /// The share of each task's requests that may be explored, in [0, 1] (default 0.15).
    #[serde(default)]
    pub explore: Option<f64>,
    /// The share of each task's requests a rejected candidate may draw when its chance to
    /// overturn the rejection is 1 (each draws its chance times this, all together at most
    /// this), in [0, 1] (unset: the mode's default, 0.2 in the floor mode, 0.02 in the budget
    /// mode).
    #[serde(default)]
    pub revisit: Option<f64>,
    /// Observations of a task after which old evidence weighs 1/e (unset: the mode's default,
    /// 200 in the floor mode, 1,000 in the budget mode).
    #[serde(default)]
    pub memory: Option<f64>,
    /// USD a call that a second of observed P95 first byte is worth (default 0: cost only).
    #[serde(default)]
    pub latency_weight: Option<f64>,
    /// The budget mode: what a good answer is worth, in USD (unset: the floor mode). Each
    /// request goes where that worth times the expected quality, less the expected cost, is
    /// largest.
    #[serde(default)]
    pub good_answer_value: Option<f64>,
}

impl RouterParams {
    /// The policy: what is written, the mode's defaults for the rest.
    pub fn policy(&self) -> RouterPolicy {
        let mode = RouterPolicy::for_mode(self.good_answer_value);
        RouterPolicy {
            floor: self.floor.unwrap_or(mode.floor),
            confidence: self.confidence.unwrap_or(mode.confidence),
            explore: self.explore.unwrap_or(mode.explore),
            revisit: self.revisit.unwrap_or(mode.revisit),
            memory: self.memory.unwrap_or(mode.memory),
            latency_weight: self.latency_weight.unwrap_or(mode.latency_weight),
            ..mode
        }
    }

    /// What is wrong with its settings, if anything: (field, message). Whether the
    /// candidates exist is the configuration's to say.
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let p = self.policy();
        let value = self.good_answer_value;
        let ranges: [(&str, f64, bool, &str); 7] = [
            (
                "floor",
                p.floor,
                p.floor > 0.0 && p.floor < 1.0,
                "must be above 0 and below 1",
            ),
            (
                "confidence",
                p.confidence,
                p.confidence > 0.5 && p.confidence < 1.0,
                "must be above 0.5 and below 1",
            ),
            (
                "explore",
                p.explore,
                (0.0..=1.0).contains(&p.explore),
                "must be from 0 to 1",
            ),
            (
                "revisit",
                p.revisit,
                (0.0..=1.0).contains(&p.revisit),
                "must be from 0 to 1",
            ),
            ("memory", p.memory, p.memory >= 1.0, "must be at least 1"),
            (
                "latency_weight",
                p.latency_weight,
                p.latency_weight >= 0.0,
                "must not be negative",
            ),
            (
                "good_answer_value",
                value.unwrap_or(1.0),
                value.is_none_or(|v| v > 0.0),
                "must be above 0 (USD a good answer is worth)",
            ),
        ];
        ranges
            .into_iter()
            .filter(|(_, v, ok, _)| !ok || !v.is_finite())
            .map(|(field, v, _, rule)| (field, format!("{rule} (is {v})")))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: serde_json::Value) -> RouterParams {
        serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A router's unset settings are its mode's; set ones are kept.
    #[test]
    fn a_router_takes_its_modes_defaults() {
        let floor = parse(serde_json::json!({"candidates": ["a"]}));
        assert_eq!(floor.policy(), RouterPolicy::for_mode(None));
        let budget = parse(serde_json::json!({"candidates": ["a"], "good_answer_value": 0.01}));
        assert_eq!(budget.policy(), RouterPolicy::for_mode(Some(0.01)));
        assert_eq!(
            (budget.policy().memory, budget.policy().revisit),
            (1_000.0, 0.02)
        );
        let set = parse(serde_json::json!({"candidates": ["a"],
            "good_answer_value": 0.01, "memory": 300.0, "revisit": 0.1, "floor": 0.9}));
        let p = set.policy();
        assert_eq!((p.memory, p.revisit, p.floor), (300.0, 0.1, 0.9));
    }

    #[test]
    fn settings_out_of_range_are_named() {
        let bad = parse(serde_json::json!({"candidates": ["a"], "floor": 1.0,
            "memory": 0.5, "good_answer_value": -1.0}));
        let fields: Vec<&str> = bad.problems().iter().map(|(f, _)| *f).collect();
        assert_eq!(fields, ["floor", "memory", "good_answer_value"]);
        assert!(
            parse(serde_json::json!({"candidates": ["a"]}))
                .problems()
                .is_empty()
        );
    }
}
