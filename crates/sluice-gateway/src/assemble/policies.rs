//! Configuration sections turned into the policies of `sluice-tail`.

use std::sync::Arc;

use sluice_config::gateway::{
    BreakerConfig, CatalogConfig, HedgeConfig, LaneConfig, LimitAlgorithm, LimitConfig,
    ModelGroupConfig, RetryConfig, RouteConfig, RouterConfig, Script as ScriptConfig,
};
use sluice_economy::InfoOverride;
use sluice_routing::auto::RouterPolicy;
use sluice_routing::rules::{Rule, Script, TaskRoute};
use sluice_tail::admission::LaneSpec;
use sluice_tail::limit::LimitSpec;
use sluice_tail::{BreakerPolicy, HedgePolicy, RetryPolicy};

use crate::assemble::{GroupPolicies, Setting};
use sluice_routing::affinity::AffinityPolicy;

/// The override a `[catalog.MODEL]` entry describes.
pub fn info_override(c: &CatalogConfig) -> InfoOverride {
    InfoOverride {
        context_window: c.context_window,
        max_output: c.max_output,
        tools: c.tools,
        vision: c.vision,
        json: c.json,
        reasoning: c.reasoning,
    }
}

/// The price a `[prices.MODEL]` entry describes: cached input and cache writes at the input
/// price when it gives none.
pub fn price(p: &sluice_config::gateway::PriceConfig) -> sluice_economy::Price {
    use sluice_economy::Micros;
    sluice_economy::Price {
        input: Micros(p.input.0),
        cached_input: Micros(p.cached_input.unwrap_or(p.input).0),
        cache_write: Micros(p.cache_write.unwrap_or(p.input).0),
        output: Micros(p.output.0),
        published: None,
    }
}

/// The task route a `[routes.NAME]` entry describes; a rule without a name is `rules[i]`.
pub fn task_route(name: &str, r: &RouteConfig) -> TaskRoute {
    let rules = r
        .rules
        .iter()
        .enumerate()
        .map(|(i, c)| Rule {
            name: Arc::from(
                c.name
                    .clone()
                    .unwrap_or_else(|| format!("rules[{i}]"))
                    .as_str(),
            ),
            group: Arc::from(c.group.as_str()),
            task: c.task.clone(),
            tenant: c.tenant.clone(),
            key: c.key.clone(),
            min_prompt_tokens: c.min_prompt_tokens,
            max_prompt_tokens: c.max_prompt_tokens,
            tools: c.tools,
            images: c.images,
            response_format: c.response_format,
            script: c.script.map(|s| match s {
                ScriptConfig::Cjk => Script::Cjk,
                ScriptConfig::Latin => Script::Latin,
            }),
        })
        .collect();
    TaskRoute {
        name: Arc::from(name),
        rules,
        default: Arc::from(r.default.as_str()),
    }
}

/// The semantic cache's policy `[cache.semantic]` describes.
pub fn semantic(c: &sluice_config::gateway::SemanticCacheConfig) -> sluice_cache::semantic::Policy {
    sluice_cache::semantic::Policy {
        mode: semantic_mode(c, None),
        ttl: c.ttl,
        max_bytes: usize::try_from(c.max_bytes).unwrap_or(usize::MAX),
    }
}

/// The mode of `[cache.semantic]`, with a group's own threshold and error bound over it.
pub fn semantic_mode(
    c: &sluice_config::gateway::SemanticCacheConfig,
    group: Option<&sluice_config::gateway::SemanticGroupConfig>,
) -> sluice_cache::semantic::Mode {
    use sluice_cache::semantic::Mode;
    use sluice_config::gateway::SemanticMode;
    match c.mode {
        SemanticMode::Static => Mode::Static {
            threshold: group.and_then(|g| g.threshold).unwrap_or(c.threshold),
            audit: c.verify_share,
        },
        SemanticMode::Verified => Mode::Verified {
            delta: group.and_then(|g| g.max_error).unwrap_or(c.max_error),
            floor: c.min_similarity,
            budget: group
                .and_then(|g| g.verify_budget)
                .unwrap_or(c.verify_budget),
        },
    }
}

/// The policy a `[routers.NAME]` entry describes.
pub fn router(c: &RouterConfig) -> RouterPolicy {
    let mode = RouterPolicy::for_mode(c.good_answer_value);
    RouterPolicy {
        floor: c.floor,
        confidence: c.confidence,
        explore: c.explore,
        revisit: c.revisit.unwrap_or(mode.revisit),
        memory: c.memory.unwrap_or(mode.memory),
        latency_weight: c.latency_weight,
        ..mode
    }
}

/// The hedging policy of `[models.*.hedge]`.
pub fn hedge(c: &HedgeConfig) -> HedgePolicy {
    HedgePolicy {
        quantile: c.quantile,
        min_samples: c.min_samples,
        min_delay: c.min_delay,
        budget: c.budget,
        burst: c.burst,
        min_per_second: c.min_per_second,
    }
}

/// The limit a `limit = { ... }` entry describes.
pub fn limit(c: &LimitConfig) -> LimitSpec {
    let (initial, min, max) = (c.initial, c.min, c.max);
    match c.algorithm {
        LimitAlgorithm::Aimd => LimitSpec::Aimd { initial, min, max },
        LimitAlgorithm::Gradient2 => LimitSpec::Gradient2 { initial, min, max },
        LimitAlgorithm::Vegas => LimitSpec::Vegas { initial, max },
        LimitAlgorithm::Fixed => LimitSpec::Fixed(initial),
    }
}

/// The retries a `retry = { ... }` entry describes.
pub fn retry(c: &RetryConfig) -> RetryPolicy {
    RetryPolicy {
        max_attempts: c.max_attempts,
        budget: c.budget,
        burst: c.burst,
        min_per_second: c.min_per_second,
        ..RetryPolicy::default()
    }
}

/// The breaker a `breaker = { ... }` entry describes.
pub fn breaker(c: &BreakerConfig) -> BreakerPolicy {
    BreakerPolicy {
        failure_rate: c.failure_rate,
        min_calls: c.min_calls,
        window: c.window,
        open_for: c.open_for,
        max_open_for: c.max_open_for,
        probe_every: c.probe_every,
        close_after: c.close_after,
        slow_call: c.slow_call,
        slow_call_rate: c.slow_call_rate,
        consecutive_failures: c.consecutive_failures,
    }
}

/// A protective policy as a group's file sets it: left out, the builder's default (on);
/// `false`, off; written, on this way.
fn setting<C, P>(t: &sluice_config::Toggle<C>, policy: impl Fn(&C) -> P) -> Setting<P> {
    use sluice_config::Toggle;
    match t {
        Toggle::Default => Setting::Inherit,
        Toggle::Off => Setting::Off,
        Toggle::On(c) => Setting::On(policy(c)),
    }
}

/// The policies of a `[models.GROUP]` entry.
pub fn of_group(m: &ModelGroupConfig) -> GroupPolicies {
    GroupPolicies {
        hedge: m.hedge.as_ref().map(hedge),
        limit: setting(&m.limit, limit),
        retry: setting(&m.retry, retry),
        breaker: setting(&m.breaker, breaker),
        timeout: m.timeout,
        affinity: m.affinity.as_ref().map(|a| AffinityPolicy {
            min_share: a.min_share,
            ttl: a.ttl,
        }),
    }
}

/// The lanes of `[lanes.*]`.
pub fn lane_specs(lanes: &[(String, LaneConfig)]) -> Vec<LaneSpec> {
    lanes
        .iter()
        .map(|(name, l)| LaneSpec {
            name: Arc::from(name.as_str()),
            share: l.share,
            max_queue: l.max_queue,
            max_wait: l.max_wait,
        })
        .collect()
}

/// The SLOs of a configuration, as the gateway judges calls by them and `sluice slo rules`
/// writes alerts for them.
pub fn slos(cfg: &sluice_config::gateway::GatewayConfig) -> Vec<sluice_telemetry::slo::Slo> {
    use sluice_config::gateway::{SloKind, SloMeasure};
    use sluice_telemetry::slo::{Measure, Objective, Slo};
    cfg.slos
        .iter()
        .filter_map(|(name, s)| {
            let objective = match s.kind {
                SloKind::Latency => Objective::Latency {
                    measure: match s.measure {
                        SloMeasure::Ttfb => Measure::Ttfb,
                        SloMeasure::Total => Measure::Total,
                    },
                    threshold: s.threshold?,
                    target: s.objective?,
                },
                SloKind::Availability => Objective::Availability {
                    target: s.objective?,
                },
                SloKind::PromptCacheShare => Objective::CacheShare { floor: s.floor? },
                SloKind::BatchWindow => Objective::BatchWindow {
                    target: s.objective?,
                },
            };
            Some(Slo {
                name: std::sync::Arc::from(name.as_str()),
                objective,
                lanes: s
                    .lanes
                    .iter()
                    .map(|l| std::sync::Arc::from(l.as_str()))
                    .collect(),
                groups: s
                    .groups
                    .iter()
                    .map(|g| std::sync::Arc::from(g.as_str()))
                    .collect(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The config's defaults and the policies' defaults are written in two crates; this keeps
    /// them from drifting apart.
    #[test]
    fn config_defaults_are_the_policy_defaults() {
        assert_eq!(hedge(&HedgeConfig::default()), HedgePolicy::default());
        assert_eq!(retry(&RetryConfig::default()), RetryPolicy::default());
        assert_eq!(breaker(&BreakerConfig::default()), BreakerPolicy::default());
        assert_eq!(
            limit(&LimitConfig::default()),
            crate::assemble::group_policies::DEFAULT_LIMIT
        );
    }

    /// A router's unset `memory` and `revisit` are its mode's; set ones are kept.
    #[test]
    fn a_router_takes_its_modes_defaults() {
        let parse = |v: serde_json::Value| -> RouterConfig {
            serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}"))
        };
        let floor = parse(serde_json::json!({"candidates": ["a"]}));
        assert_eq!(router(&floor), RouterPolicy::for_mode(None));
        let budget = router(&parse(
            serde_json::json!({"candidates": ["a"], "good_answer_value": 0.01}),
        ));
        assert_eq!(budget, RouterPolicy::for_mode(Some(0.01)));
        assert_eq!((budget.memory, budget.revisit), (1_000.0, 0.02));
        let set = router(&parse(serde_json::json!({"candidates": ["a"],
            "good_answer_value": 0.01, "memory": 300.0, "revisit": 0.1})));
        assert_eq!((set.memory, set.revisit), (300.0, 0.1));
    }
}
