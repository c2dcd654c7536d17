//! `[routes.NAME]`: a model name clients may ask for (`auto`, say) that is not a group but a
//! list of rules choosing one by what the request says of itself: the task it declares, its
//! tenant or key, its prompt's size, and what it carries. First match wins. And
//! `[routers.NAME]`: a model name that learns which of its candidate groups to choose.

use serde::Deserialize;

/// `[routes.NAME]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// The rules, in the order they are tried.
    #[serde(default)]
    pub rules: Vec<RuleConfig>,
    /// The group of a request no rule takes.
    pub default: String,
}

/// `[routers.NAME]`: a model name whose group is chosen per request among `candidates` by
/// what has been learnt of each for the request's task (feedback and implicit signals): the
/// cheapest believed good enough that fits the deadline, exploring a bounded share.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RouterConfig {
    /// The model groups it chooses among (at least one).
    pub candidates: Vec<String>,
    /// The probability of a good answer a candidate must credibly clear (default 0.8).
    #[serde(default = "defaults::floor")]
    pub floor: f64,
    /// How credible "clears the floor" must be, in (0.5, 1) (default 0.8).
    #[serde(default = "defaults::confidence")]
    pub confidence: f64,
    /// The share of each task's requests that may be explored, in [0, 1] (default 0.15).
    #[serde(default = "defaults::explore")]
    pub explore: f64,
    /// The share of each task's requests that revisits cheaper candidates already rejected,
    /// in [0, 1] (unset: the mode's default, 0.05 in the floor mode, 0.02 in the budget mode).
    #[serde(default)]
    pub revisit: Option<f64>,
    /// Observations of a task after which old evidence weighs 1/e (unset: the mode's default,
    /// 200 in the floor mode, 1,000 in the budget mode).
    #[serde(default)]
    pub memory: Option<f64>,
    /// USD a call that a second of observed P95 first byte is worth (default 0: cost only).
    #[serde(default)]
    pub latency_weight: f64,
    /// The budget mode: what a good answer is worth, in USD (unset: the floor mode). Each
    /// request goes where that worth times the expected quality, less the expected cost, is
    /// largest.
    #[serde(default)]
    pub good_answer_value: Option<f64>,
}

mod defaults {
    pub fn floor() -> f64 {
        0.8
    }
    pub fn confidence() -> f64 {
        0.8
    }
    pub fn explore() -> f64 {
        0.15
    }
}

/// The script most of a prompt's letters are written in.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Script {
    /// Chinese, Japanese or Korean characters are at least 30% of its units (a CJK
    /// character or a word of other letters each count one).
    Cjk,
    /// Otherwise.
    Latin,
}

/// One rule: every condition it gives must hold; the ones it leaves out hold for any
/// request.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
#[serde(default)]
pub struct RuleConfig {
    /// Its name in `x-sluice-route`, the call record and metrics (default `rules[i]`).
    pub name: Option<String>,
    /// The group it sends requests to (required).
    pub group: String,
    /// The task is one of these (`x-sluice-task`, else the body's `metadata.task`).
    pub task: Vec<String>,
    /// The tenant is one of these.
    pub tenant: Vec<String>,
    /// The API key's name is one of these.
    pub key: Vec<String>,
    /// The prompt has at least this many tokens (counted as the ledger counts them).
    pub min_prompt_tokens: Option<u64>,
    /// The prompt has at most this many tokens.
    pub max_prompt_tokens: Option<u64>,
    /// The request offers tools (or does not, with `false`).
    pub tools: Option<bool>,
    /// The request carries images.
    pub images: Option<bool>,
    /// The request asks for a `response_format`.
    pub response_format: Option<bool>,
    /// Its text is mostly CJK, or mostly Latin.
    pub script: Option<Script>,
}

impl RuleConfig {
    /// Whether this rule takes every request `later` takes, so that `later`, after it, can
    /// never fire.
    pub fn covers(&self, later: &RuleConfig) -> bool {
        let list = |mine: &[String], theirs: &[String]| {
            mine.is_empty() || (!theirs.is_empty() && theirs.iter().all(|t| mine.contains(t)))
        };
        let flag = |mine: Option<bool>, theirs: Option<bool>| mine.is_none() || mine == theirs;
        let min_ok = match (self.min_prompt_tokens, later.min_prompt_tokens) {
            (None, _) => true,
            (Some(a), Some(b)) => a <= b,
            (Some(a), None) => a == 0,
        };
        let max_ok = match (self.max_prompt_tokens, later.max_prompt_tokens) {
            (None, _) => true,
            (Some(a), Some(b)) => a >= b,
            (Some(_), None) => false,
        };
        list(&self.task, &later.task)
            && list(&self.tenant, &later.tenant)
            && list(&self.key, &later.key)
            && min_ok
            && max_ok
            && flag(self.tools, later.tools)
            && flag(self.images, later.images)
            && flag(self.response_format, later.response_format)
            && (self.script.is_none() || self.script == later.script)
    }

    /// Whether some request could match both this rule and `other`, with at least one
    /// condition in common (so which fires depends on their order).
    pub fn overlaps(&self, other: &RuleConfig) -> bool {
        let mut shared = false;
        let mut list = |a: &[String], b: &[String]| {
            if a.is_empty() || b.is_empty() {
                return true;
            }
            shared = true;
            a.iter().any(|x| b.contains(x))
        };
        let lists = list(&self.task, &other.task)
            && list(&self.tenant, &other.tenant)
            && list(&self.key, &other.key);
        let mut flag = |a: Option<bool>, b: Option<bool>| match (a, b) {
            (Some(x), Some(y)) => {
                shared = true;
                x == y
            }
            _ => true,
        };
        let flags = flag(self.tools, other.tools)
            && flag(self.images, other.images)
            && flag(self.response_format, other.response_format);
        let script = match (self.script, other.script) {
            (Some(a), Some(b)) => {
                shared = true;
                a == b
            }
            _ => true,
        };
        let lo = self
            .min_prompt_tokens
            .unwrap_or(0)
            .max(other.min_prompt_tokens.unwrap_or(0));
        let hi = self
            .max_prompt_tokens
            .unwrap_or(u64::MAX)
            .min(other.max_prompt_tokens.unwrap_or(u64::MAX));
        let sizes = (self.min_prompt_tokens.is_some() || self.max_prompt_tokens.is_some())
            && (other.min_prompt_tokens.is_some() || other.max_prompt_tokens.is_some());
        shared |= sizes;
        lists && flags && script && lo <= hi && shared
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(f: impl FnOnce(&mut RuleConfig)) -> RuleConfig {
        let mut r = RuleConfig {
            group: "g".into(),
            ..RuleConfig::default()
        };
        f(&mut r);
        r
    }

    #[test]
    fn a_rule_covers_the_narrower_rules_after_it() {
        let any = rule(|_| {});
        let review = rule(|r| r.task = vec!["review".into()]);
        let review_zh = rule(|r| {
            r.task = vec!["review".into()];
            r.script = Some(Script::Cjk);
        });
        let long = rule(|r| r.min_prompt_tokens = Some(30_000));
        let longer = rule(|r| r.min_prompt_tokens = Some(50_000));
        assert!(any.covers(&review));
        assert!(review.covers(&review_zh));
        assert!(!review_zh.covers(&review));
        assert!(long.covers(&longer));
        assert!(!longer.covers(&long));
        assert!(!review.covers(&any));
        let two = rule(|r| r.task = vec!["review".into(), "summary".into()]);
        assert!(two.covers(&review) && !review.covers(&two));
    }

    #[test]
    fn rules_overlap_when_one_request_could_match_both_on_a_shared_condition() {
        let review = rule(|r| r.task = vec!["review".into()]);
        let both = rule(|r| r.task = vec!["review".into(), "summary".into()]);
        let summary = rule(|r| r.task = vec!["summary".into()]);
        let tools = rule(|r| r.tools = Some(true));
        assert!(review.overlaps(&both));
        assert!(!review.overlaps(&summary));
        assert!(
            !review.overlaps(&tools),
            "nothing in common: order is not in question"
        );
        let short = rule(|r| r.max_prompt_tokens = Some(1_000));
        let mid = rule(|r| {
            r.min_prompt_tokens = Some(500);
            r.max_prompt_tokens = Some(5_000);
        });
        let long = rule(|r| r.min_prompt_tokens = Some(5_001));
        assert!(short.overlaps(&mid) && !short.overlaps(&long) && !mid.overlaps(&long));
    }
}
