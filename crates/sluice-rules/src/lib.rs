//! The rule engine of document analysis: which rules a contract's clauses trip. Rules are
//! written in TOML (`spec.rs`) and compiled once: every literal of every rule (keywords,
//! phrases, `near` terms, `unless` terms) into one Aho-Corasick automaton, every regular
//! expression into one multi-pattern engine that says which of them match (linear time, so
//! no rule text can make it backtrack). A clause is then scanned once by each, and each rule
//! decided from what was found: a match, its clause kind, its `unless` terms absent, its
//! `near` terms close enough. Clauses are ruled across threads.

pub mod shipped;
mod spec;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use regex_automata::meta::{self, Regex};
use regex_automata::nfa::thompson::WhichCaptures;
use regex_automata::util::syntax;
use regex_automata::{Input, PatternSet};

pub use spec::{LoadError, Near, RuleError, RuleSpec, Severity, parse};

/// One clause to rule.
#[derive(Clone, Copy, Debug)]
pub struct Clause<'a> {
    /// Its kind (`clause`, `heading`, `definition`...), for rules that name kinds.
    pub kind: &'a str,
    /// Its text.
    pub text: &'a str,
}

/// A rule a clause tripped, with where its first match is (byte offsets in the clause).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hit {
    /// The rule's index in [`Engine::rules`].
    pub rule: usize,
    /// Start of its first match.
    pub start: usize,
    /// End of its first match.
    pub end: usize,
}

/// What a literal is to its rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// A keyword or a phrase: the rule matches.
    Match,
    /// One of the two `near` terms.
    Near(usize),
    /// An `unless` term: the rule does not apply.
    Unless,
}

/// Rules compiled once, to run over any number of clauses.
#[derive(Debug)]
pub struct Engine {
    rules: Vec<RuleSpec>,
    literals: AhoCorasick,
    /// For each literal pattern: its rule and role.
    roles: Vec<(usize, Role)>,
    /// Every regular expression at once (which match), and each alone (where).
    regexes: Option<(Regex, Vec<Regex>)>,
    /// For each regular expression: its rule.
    regex_rule: Vec<usize>,
}

/// What one clause's scan found of one rule.
#[derive(Clone, Debug, Default)]
struct Found {
    first: Option<(usize, usize)>,
    near: [Vec<usize>; 2],
    unless: bool,
}

impl Engine {
    /// Compiles the rules of a TOML rule file, refusing it with every error and its rule id.
    pub fn load(text: &str) -> Result<Self, LoadError> {
        Self::compile(parse(text)?)
    }

    /// Compiles `rules`: a bad regular expression is named with its rule.
    pub fn compile(rules: Vec<RuleSpec>) -> Result<Self, LoadError> {
        let mut literals = Vec::new();
        let mut roles = Vec::new();
        let mut patterns = Vec::new();
        let mut regex_rule = Vec::new();
        let mut errors = Vec::new();
        let insensitive = syntax::Config::new().case_insensitive(true);
        let mut each = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            for k in &r.keywords {
                literals.push(k.trim().to_string());
                roles.push((i, Role::Match));
            }
            for p in &r.phrases {
                literals.push(p.trim().to_string());
                roles.push((i, Role::Match));
            }
            if let Some(near) = &r.near {
                for (side, t) in near.terms.iter().enumerate() {
                    literals.push(t.trim().to_string());
                    roles.push((i, Role::Near(side)));
                }
            }
            for u in &r.unless {
                literals.push(u.trim().to_string());
                roles.push((i, Role::Unless));
            }
            for p in &r.regex {
                match Regex::builder().syntax(insensitive).build(p) {
                    Ok(re) => {
                        each.push(re);
                        patterns.push(loosened(p));
                        regex_rule.push(i);
                    }
                    Err(e) => errors.push(RuleError {
                        rule: r.id.clone(),
                        problem: format!("regex {p:?} does not compile: {e}"),
                    }),
                }
            }
        }
        if !errors.is_empty() {
            return Err(LoadError::Rules(errors));
        }
        let literals = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .build(&literals)
            .map_err(|e| LoadError::Toml(format!("the rules' literals do not compile: {e}")))?;
        let regexes = if patterns.is_empty() {
            None
        } else {
            let all = Regex::builder()
                .syntax(insensitive)
                .configure(
                    meta::Config::new()
                        .match_kind(regex_automata::MatchKind::All)
                        // Which patterns match, never where their groups are: without
                        // capture slots, a search keeps no slot per state and group.
                        .which_captures(WhichCaptures::None)
                        .nfa_size_limit(Some(NFA_LIMIT)),
                )
                .build_many(&patterns)
                .map_err(|e| LoadError::Toml(format!("the rules' regexes do not compile: {e}")))?;
            Some((all, each))
        };
        Ok(Self {
            rules,
            literals,
            roles,
            regexes,
            regex_rule,
        })
    }

    /// The rules, in file order.
    pub fn rules(&self) -> &[RuleSpec] {
        &self.rules
    }

    /// The rules `clause` trips, in rule order.
    pub fn rule(&self, clause: Clause<'_>) -> Vec<Hit> {
        let text = clause.text;
        let mut found: Vec<(usize, Found)> = Vec::new();
        for m in self.literals.find_overlapping_iter(text) {
            let (rule, role) = self.roles[m.pattern().as_usize()];
            if !word_bounded(text, m.start(), m.end()) {
                continue;
            }
            let f = entry(&mut found, rule);
            match role {
                Role::Match => {
                    if f.first.is_none() {
                        f.first = Some((m.start(), m.end()));
                    }
                }
                Role::Near(side) => f.near[side].push(m.start()),
                Role::Unless => f.unless = true,
            }
        }
        if let Some((all, each)) = &self.regexes {
            let mut set = PatternSet::new(all.pattern_len());
            all.which_overlapping_matches(&Input::new(text), &mut set);
            for pid in set.iter() {
                let rule = self.regex_rule[pid.as_usize()];
                if let Some(m) = each[pid.as_usize()].find(text) {
                    let f = entry(&mut found, rule);
                    let earlier = f.first.is_none_or(|(s, _)| m.start() < s);
                    if earlier {
                        f.first = Some((m.start(), m.end()));
                    }
                }
            }
        }
        let mut hits: Vec<Hit> = found
            .into_iter()
            .filter_map(|(rule, f)| {
                let spec = &self.rules[rule];
                let (start, end) = f.first?;
                let kind_ok = spec.kinds.is_empty() || spec.kinds.iter().any(|k| k == clause.kind);
                let near_ok = spec
                    .near
                    .as_ref()
                    .is_none_or(|n| near_enough(text, &f.near, n.within));
                (kind_ok && near_ok && !f.unless).then_some(Hit { rule, start, end })
            })
            .collect();
        hits.sort_by_key(|h| h.rule);
        hits
    }

    /// The rules each of `clauses` trips, ruled on up to `threads` threads.
    pub fn rule_all(&self, clauses: &[Clause<'_>], threads: usize) -> Vec<Vec<Hit>> {
        let threads = threads.clamp(1, clauses.len().max(1));
        if threads == 1 {
            return clauses.iter().map(|c| self.rule(*c)).collect();
        }
        let chunk = clauses.len().div_ceil(threads);
        std::thread::scope(|s| {
            let parts: Vec<_> = clauses
                .chunks(chunk)
                .map(|part| s.spawn(move || part.iter().map(|c| self.rule(*c)).collect::<Vec<_>>()))
                .collect();
            parts
                .into_iter()
                .flat_map(|p| p.join().unwrap_or_default())
                .collect()
        })
    }
}

/// `pattern` with its long bounded gaps (`{0,120}`) made unbounded (`*`): a pattern that
/// matches wherever the exact one does, whose automaton does not grow with the gap. The
/// combined engine runs these to say which rules may match; each candidate's own exact
/// expression then decides (exact gaps make the combined automaton three times larger).
fn loosened(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut rest = pattern;
    while let Some(at) = rest.find("{0,") {
        let close = rest[at..].find('}').map(|c| at + c);
        let bound = close.and_then(|c| rest[at + 3..c].parse::<usize>().ok());
        out.push_str(&rest[..at]);
        match (close, bound) {
            (Some(c), Some(n)) if n >= LOOSE_FROM && !rest[..at].ends_with('\\') => {
                out.push('*');
                rest = &rest[c + 1..];
            }
            _ => {
                out.push_str("{0,");
                rest = &rest[at + 3..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The most memory the combined engine's automaton may take (the engine's default, 10 MiB,
/// holds a few hundred rules' expressions; thousands need more).
const NFA_LIMIT: usize = 128 << 20;

/// The shortest gap [`loosened`] makes unbounded.
const LOOSE_FROM: usize = 8;

/// What the scan found of `rule` so far, made empty on first use (a clause trips few rules:
/// a short list beats a map).
fn entry(found: &mut Vec<(usize, Found)>, rule: usize) -> &mut Found {
    let i = match found.iter().position(|(r, _)| *r == rule) {
        Some(i) => i,
        None => {
            found.push((rule, Found::default()));
            found.len() - 1
        }
    };
    &mut found[i].1
}

/// Whether `text[start..end]` is a whole word: no letter or digit of a word written with
/// spaces just before or after it (text without spaces, such as Chinese, has no such edge).
fn word_bounded(text: &str, start: usize, end: usize) -> bool {
    let before = text[..start].chars().next_back();
    let after = text[end..].chars().next();
    let joins = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    let first = text[start..end].chars().next();
    let last = text[start..end].chars().next_back();
    let glued_before = joins(before) && joins(first);
    let glued_after = joins(after) && joins(last);
    !(glued_before || glued_after)
}

/// Whether some occurrence of the first `near` term is within `within` words of one of the
/// second (counted in characters where the text between has no spaces).
fn near_enough(text: &str, at: &[Vec<usize>; 2], within: usize) -> bool {
    at[0].iter().any(|&a| {
        at[1].iter().any(|&b| {
            let between = &text[a.min(b)..a.max(b)];
            let words = between.split_whitespace().count();
            let apart = if between.contains(char::is_whitespace) {
                words.saturating_sub(1)
            } else {
                between.chars().count()
            };
            apart <= within
        })
    })
}

#[cfg(test)]
mod tests;
