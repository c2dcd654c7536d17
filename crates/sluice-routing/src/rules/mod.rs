//! Task routes: a model name (`auto`, say) whose group is chosen per request by rules over
//! what the request says of itself. The decision is a pure function of the facts the walk
//! gathers; first match wins, and a request no rule takes goes to the route's default.
//!
//! `[routes.NAME]` is read straight into [`RouteParams`]; [`order`] says which rules a rule
//! before them hides or overlaps, for the configuration's checks.

pub mod order;

use std::sync::Arc;

/// The script most of a prompt is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Script {
    /// Chinese, Japanese or Korean: CJK characters are at least [`CJK_SHARE`] of its units.
    Cjk,
    /// Otherwise.
    Latin,
}

/// The share of CJK characters among a text's units (each CJK character one unit, each word
/// of other letters one unit, since a CJK character carries about what a word does) from
/// which it counts as CJK text.
pub const CJK_SHARE: f64 = 0.3;

impl Script {
    /// The script of `text`: CJK when CJK characters (ideographs, kana, hangul) are at least
    /// [`CJK_SHARE`] of its units.
    pub fn of(text: &str) -> Self {
        let (mut cjk, mut words, mut in_word) = (0u64, 0u64, false);
        for c in text.chars() {
            if is_cjk(c) {
                cjk += 1;
                in_word = false;
            } else if c.is_alphabetic() {
                if !in_word {
                    words += 1;
                }
                in_word = true;
            } else {
                in_word = false;
            }
        }
        let units = cjk + words;
        if units > 0 && cjk as f64 >= CJK_SHARE * units as f64 {
            Self::Cjk
        } else {
            Self::Latin
        }
    }
}

fn is_cjk(c: char) -> bool {
    matches!(u32::from(c),
        0x3040..=0x30FF      // hiragana, katakana
        | 0x3400..=0x4DBF    // CJK extension A
        | 0x4E00..=0x9FFF    // CJK unified ideographs
        | 0xAC00..=0xD7AF    // hangul syllables
        | 0xF900..=0xFAFF    // CJK compatibility ideographs
        | 0x20000..=0x2FFFF) // CJK extensions B and beyond
}

/// One rule: every condition it gives must hold; the ones it leaves out hold for any
/// request. Read as it is written in `[routes.NAME] rules` (unknown fields refused).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Rule {
    /// Its name in `x-sluice-route`, the call record and metrics (empty as written:
    /// `rules[i]`, given by [`TaskRoute::new`]).
    pub name: Arc<str>,
    /// The group it sends requests to (required).
    pub group: Arc<str>,
    /// The declared task is one of these (`x-sluice-task`, else the body's
    /// `metadata.task`; empty: any).
    pub task: Vec<String>,
    /// The tenant is one of these (empty: any).
    pub tenant: Vec<String>,
    /// The key's name is one of these (empty: any).
    pub key: Vec<String>,
    /// At least this many prompt tokens (counted as the ledger counts them).
    pub min_prompt_tokens: Option<u64>,
    /// At most this many prompt tokens.
    pub max_prompt_tokens: Option<u64>,
    /// Offers tools, or not.
    pub tools: Option<bool>,
    /// Carries images, or not.
    pub images: Option<bool>,
    /// Asks for a `response_format`, or not.
    pub response_format: Option<bool>,
    /// Its text is mostly CJK, or mostly Latin.
    pub script: Option<Script>,
}

/// `[routes.NAME]` as it is written: the rules in the order they are tried, and the group of
/// a request no rule takes.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteParams {
    /// The rules, in the order they are tried.
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// The group of a request no rule takes.
    pub default: Arc<str>,
}

impl RouteParams {
    /// The label of rule `i`: its name, else `rules[i]`.
    pub fn label(&self, i: usize) -> String {
        match self.rules.get(i) {
            Some(r) if !r.name.is_empty() => r.name.to_string(),
            _ => format!("rules[{i}]"),
        }
    }
}

/// What the walk knows of a request when a task route decides.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Facts<'a> {
    /// `x-sluice-task`, else the body's `metadata.task`.
    pub task: Option<&'a str>,
    /// The tenant.
    pub tenant: Option<&'a str>,
    /// The API key's name.
    pub key: Option<&'a str>,
    /// The prompt's tokens, counted only when some rule asks ([`TaskRoute::counts_tokens`]).
    pub prompt_tokens: Option<u64>,
    /// It offers tools.
    pub tools: bool,
    /// It carries images.
    pub images: bool,
    /// It asks for a `response_format`.
    pub response_format: bool,
    /// Its text's script, read only when some rule asks ([`TaskRoute::reads_script`]).
    pub script: Option<Script>,
}

impl Rule {
    fn matches(&self, f: &Facts<'_>) -> bool {
        let one_of = |list: &[String], v: Option<&str>| {
            list.is_empty() || v.is_some_and(|v| list.iter().any(|x| x == v))
        };
        let flag = |want: Option<bool>, have: bool| want.is_none_or(|w| w == have);
        let tokens = f.prompt_tokens.unwrap_or(0);
        one_of(&self.task, f.task)
            && one_of(&self.tenant, f.tenant)
            && one_of(&self.key, f.key)
            && self.min_prompt_tokens.is_none_or(|m| tokens >= m)
            && self.max_prompt_tokens.is_none_or(|m| tokens <= m)
            && flag(self.tools, f.tools)
            && flag(self.images, f.images)
            && flag(self.response_format, f.response_format)
            && self.script.is_none_or(|s| f.script == Some(s))
    }
}

/// A model name that chooses a group by rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskRoute {
    /// The name clients send as `model`.
    pub name: Arc<str>,
    /// Tried in order.
    pub rules: Vec<Rule>,
    /// The group of a request no rule takes.
    pub default: Arc<str>,
}

/// What a task route decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Routed<'a> {
    /// The group.
    pub group: &'a Arc<str>,
    /// The rule that fired: its name, or `default`.
    pub rule: Arc<str>,
    /// The request declared a task that no rule of the route names (routed by the rules
    /// that do not look at tasks, or by the default, and counted).
    pub unknown_task: bool,
}

/// The label of the default rule.
pub const DEFAULT_RULE: &str = "default";

impl TaskRoute {
    /// The route `[routes.NAME]` describes, each unnamed rule named `rules[i]`.
    pub fn new(name: &str, p: &RouteParams) -> Self {
        let rules = p
            .rules
            .iter()
            .enumerate()
            .map(|(i, r)| Rule {
                name: Arc::from(p.label(i).as_str()),
                ..r.clone()
            })
            .collect();
        Self {
            name: Arc::from(name),
            rules,
            default: p.default.clone(),
        }
    }

    /// Whether some rule looks at the prompt's size (so the walk counts its tokens).
    pub fn counts_tokens(&self) -> bool {
        self.rules
            .iter()
            .any(|r| r.min_prompt_tokens.is_some() || r.max_prompt_tokens.is_some())
    }

    /// Whether some rule looks at the prompt's script.
    pub fn reads_script(&self) -> bool {
        self.rules.iter().any(|r| r.script.is_some())
    }

    /// The group for a request with facts `f`: the first rule that matches, else the
    /// default.
    pub fn decide(&self, f: &Facts<'_>) -> Routed<'_> {
        let unknown_task = f
            .task
            .is_some_and(|t| !self.rules.iter().any(|r| r.task.iter().any(|x| x == t)));
        match self.rules.iter().find(|r| r.matches(f)) {
            Some(r) => Routed {
                group: &r.group,
                rule: r.name.clone(),
                unknown_task,
            },
            None => Routed {
                group: &self.default,
                rule: Arc::from(DEFAULT_RULE),
                unknown_task,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route() -> TaskRoute {
        let rule = |name: &str, group: &str, f: &dyn Fn(&mut Rule)| {
            let mut r = Rule {
                name: Arc::from(name),
                group: Arc::from(group),
                ..Rule::default()
            };
            f(&mut r);
            r
        };
        TaskRoute {
            name: Arc::from("auto"),
            rules: vec![
                rule("contracts", "strong", &|r| {
                    r.task = vec!["contract-review".into()]
                }),
                rule("long", "long-context", &|r| {
                    r.min_prompt_tokens = Some(30_000)
                }),
                rule("chinese", "glm", &|r| r.script = Some(Script::Cjk)),
                rule("tools", "tools", &|r| r.tools = Some(true)),
                rule("vip", "strong", &|r| r.tenant = vec!["acme".into()]),
            ],
            default: Arc::from("cheap"),
        }
    }

    #[test]
    fn the_first_rule_that_matches_decides_else_the_default() {
        let r = route();
        let decide = |f: Facts<'_>| {
            let d = r.decide(&f);
            (d.group.to_string(), d.rule.to_string(), d.unknown_task)
        };
        let base = Facts {
            prompt_tokens: Some(100),
            script: Some(Script::Latin),
            ..Facts::default()
        };
        assert_eq!(
            decide(base.clone()),
            ("cheap".into(), "default".into(), false)
        );
        let contract = Facts {
            task: Some("contract-review"),
            prompt_tokens: Some(50_000),
            ..base.clone()
        };
        assert_eq!(
            decide(contract),
            ("strong".into(), "contracts".into(), false)
        );
        let long = Facts {
            prompt_tokens: Some(50_000),
            tools: true,
            ..base.clone()
        };
        assert_eq!(decide(long).1, "long", "first match wins over tools");
        let zh = Facts {
            script: Some(Script::Cjk),
            ..base.clone()
        };
        assert_eq!(decide(zh).0, "glm");
        let vip = Facts {
            tenant: Some("acme"),
            ..base.clone()
        };
        assert_eq!(decide(vip).1, "vip");
        // A task no rule names goes by the other rules, and is said to be unknown.
        let odd = Facts {
            task: Some("poetry"),
            ..base
        };
        assert_eq!(decide(odd), ("cheap".into(), "default".into(), true));
        assert!(r.counts_tokens() && r.reads_script());
    }

    #[test]
    fn cjk_text_is_told_from_latin_text() {
        assert_eq!(Script::of("合同第四条约定的违约责任是否合理"), Script::Cjk);
        assert_eq!(
            Script::of("Review clause 4 of the contract."),
            Script::Latin
        );
        // A Chinese question with English terms in it is still Chinese.
        assert_eq!(
            Script::of("请审查 indemnity 条款和 liability cap"),
            Script::Cjk
        );
        assert_eq!(Script::of("これは契約書です"), Script::Cjk);
        assert_eq!(Script::of("12345 !!"), Script::Latin);
    }
}
