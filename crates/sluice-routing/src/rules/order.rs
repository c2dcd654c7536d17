//! Which rules of a route hide or overlap the ones after them: a rule that takes every
//! request a later one would makes the later one dead; two that share a condition and
//! differ in group depend on their order.

use super::Rule;

impl Rule {
    /// Whether this rule takes every request `later` takes, so that `later`, after it, can
    /// never fire.
    pub fn covers(&self, later: &Rule) -> bool {
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
    pub fn overlaps(&self, other: &Rule) -> bool {
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
    use crate::rules::Script;

    fn rule(f: impl FnOnce(&mut Rule)) -> Rule {
        let mut r = Rule {
            group: std::sync::Arc::from("g"),
            ..Rule::default()
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
