//! The rule engine of document analysis: which rules a contract's clauses trip. Rules are
//! written in TOML (`spec.rs`) and compiled once into one Aho-Corasick automaton holding every
//! literal of every rule (keywords, phrases, `near` terms, `unless` terms) and every regular
//! expression's needed words: for each part of it that is a literal or a choice of literals,
//! those (`liabilit` and one of `shall not exceed`, `limited to`, `capped at` for
//! `liabilit\w*.{0,120}(shall not exceed|limited to|capped at)`). A clause is scanned once; a
//! regular expression runs only on a clause that holds a word of each of its needed parts
//! (those that need none run on every clause), each a linear-time engine, so that no rule
//! text can make it backtrack and a thousand expressions cost what the few that can match
//! cost. Each rule is then decided from what was found: a
//! match, its clause kind, its `unless` terms absent, its `near` terms close enough. Clauses
//! are ruled across threads.

pub mod shipped;
mod spec;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use rayon::prelude::*;
use regex_automata::meta::Regex;
use regex_automata::util::syntax;
use regex_syntax::hir::literal::Extractor;
use regex_syntax::hir::{Hir, HirKind};

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
    /// One of the words regular expression `re` needs in place `part` of its parts.
    Need {
        /// The expression.
        re: usize,
        /// Which of its needed parts.
        part: u32,
    },
}

/// Rules compiled once, to run over any number of clauses.
#[derive(Debug)]
pub struct Engine {
    rules: Vec<RuleSpec>,
    literals: AhoCorasick,
    /// For each distinct literal (ASCII case aside): the rules it serves, and how.
    roles: Vec<Vec<(usize, Role)>>,
    /// Each regular expression.
    regexes: Vec<Regex>,
    /// For each regular expression: its rule.
    regex_rule: Vec<usize>,
    /// The regular expressions that need no word (they run on every clause).
    unanchored: Vec<usize>,
    /// For each regular expression: how many parts it needs (each one of a few words).
    needed: Vec<u32>,
    /// Thread pools by size, made on first use.
    pools: parking_lot::Mutex<Vec<(usize, Arc<rayon::ThreadPool>)>>,
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
        let mut regex_rule = Vec::new();
        let mut unanchored = Vec::new();
        let mut needed = Vec::new();
        let mut errors = Vec::new();
        let insensitive = syntax::Config::new().case_insensitive(true);
        let mut regexes = Vec::new();
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
                        let at = regexes.len();
                        let parts = needs(p);
                        if parts.is_empty() {
                            unanchored.push(at);
                        }
                        needed.push(parts.len() as u32);
                        for (part, words) in parts.into_iter().enumerate() {
                            for w in words {
                                literals.push(w);
                                let part = part as u32;
                                roles.push((i, Role::Need { re: at, part }));
                            }
                        }
                        regexes.push(re);
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
        let (unique, roles) = dedupe(literals, roles);
        let literals = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .build(&unique)
            .map_err(|e| LoadError::Toml(format!("the rules' literals do not compile: {e}")))?;
        Ok(Self {
            rules,
            literals,
            roles,
            regexes,
            regex_rule,
            unanchored,
            needed,
            pools: parking_lot::Mutex::new(Vec::new()),
        })
    }

    /// The same engine with every regular expression run on every clause: what the needed
    /// words must never change.
    #[cfg(test)]
    fn ungated(mut self) -> Self {
        self.unanchored = (0..self.regexes.len()).collect();
        self.needed = vec![u32::MAX; self.regexes.len()];
        self
    }

    /// The rules, in file order.
    pub fn rules(&self) -> &[RuleSpec] {
        &self.rules
    }

    /// The rules `clause` trips, in rule order.
    pub fn rule(&self, clause: Clause<'_>) -> Vec<Hit> {
        SCRATCH.with(|s| self.rule_with(clause, &mut s.borrow_mut()))
    }

    fn rule_with(&self, clause: Clause<'_>, s: &mut Scratch) -> Vec<Hit> {
        let text = clause.text;
        if s.masks.len() < self.regexes.len() {
            s.masks.resize(self.regexes.len(), 0);
        }
        if s.slot.len() < self.rules.len() {
            s.slot.resize(self.rules.len(), u32::MAX);
        }
        let mut found: Vec<(usize, Found)> = Vec::new();
        for m in self.literals.find_overlapping_iter(text) {
            let mut bounded = None;
            for &(rule, role) in &self.roles[m.pattern().as_usize()] {
                if let Role::Need { re, part } = role {
                    // Which of each expression's needed parts were seen.
                    if s.masks[re] == 0 {
                        s.touched.push(re);
                    }
                    s.masks[re] |= 1u64 << part;
                    continue;
                }
                if !*bounded.get_or_insert_with(|| word_bounded(text, m.start(), m.end())) {
                    continue;
                }
                let f = entry(&mut found, &mut s.slot, rule);
                match role {
                    Role::Match => {
                        if f.first.is_none() {
                            f.first = Some((m.start(), m.end()));
                        }
                    }
                    Role::Near(side) => f.near[side].push(m.start()),
                    Role::Unless => f.unless = true,
                    Role::Need { .. } => {}
                }
            }
        }
        // An expression runs where every part it needs was seen (or when it needs none).
        let mut ready: Vec<usize> = Vec::new();
        for re in s.touched.drain(..) {
            if s.masks[re].count_ones() == self.needed[re] {
                ready.push(re);
            }
            s.masks[re] = 0;
        }
        ready.extend(self.unanchored.iter().copied());
        for re in ready {
            if let Some(m) = self.regexes[re].find(text) {
                let f = entry(&mut found, &mut s.slot, self.regex_rule[re]);
                if f.first.is_none_or(|(s, _)| m.start() < s) {
                    f.first = Some((m.start(), m.end()));
                }
            }
        }
        for (rule, _) in &found {
            s.slot[*rule] = u32::MAX;
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

    /// The rules each of `clauses` trips, on this thread, unless `stop` is set first (it is
    /// looked at between clauses): one copy of hedged work, which gives up when the other
    /// copy has finished.
    pub fn rule_until(&self, clauses: &[Clause<'_>], stop: &AtomicBool) -> Option<Vec<Vec<Hit>>> {
        let mut out = Vec::with_capacity(clauses.len());
        for c in clauses {
            if stop.load(Ordering::Relaxed) {
                return None;
            }
            out.push(self.rule(*c));
        }
        Some(out)
    }

    /// The rules each of `clauses` trips, ruled on up to `threads` threads: the clauses cut
    /// in `threads` runs, one per thread of a pool kept for that many threads (so that each
    /// thread's search caches stay warm from one document to the next).
    pub fn rule_all(&self, clauses: &[Clause<'_>], threads: usize) -> Vec<Vec<Hit>> {
        let threads = threads.clamp(1, clauses.len().max(1));
        let pool = match (threads, self.pool(threads)) {
            (1, _) | (_, None) => return clauses.iter().map(|c| self.rule(*c)).collect(),
            (_, Some(pool)) => pool,
        };
        let chunk = clauses.len().div_ceil(threads);
        pool.install(|| {
            clauses
                .par_chunks(chunk)
                .map(|part| part.iter().map(|c| self.rule(*c)).collect::<Vec<_>>())
                .collect::<Vec<_>>()
        })
        .into_iter()
        .flatten()
        .collect()
    }

    /// The pool of `threads` threads this engine rules on (made on first use), or `None` when
    /// the system will not start threads.
    pub fn pool(&self, threads: usize) -> Option<Arc<rayon::ThreadPool>> {
        let mut pools = self.pools.lock();
        if let Some(p) = pools.iter().find(|(n, _)| *n == threads) {
            return Some(p.1.clone());
        }
        let pool = Arc::new(
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(|i| format!("sluice-rules-{i}"))
                .build()
                .ok()?,
        );
        pools.push((threads, pool.clone()));
        Some(pool)
    }
}

/// The words `pattern` needs: for each part of it that is a literal or a choice of literals
/// (`liabilit`, `(shall not exceed|limited to)`), those literals, lower-cased (the automaton
/// ignores ASCII case, as the expressions do). A clause can match only if one word of every
/// part is in it. Empty when no part is that simple: the expression runs on every clause.
fn needs(pattern: &str) -> Vec<Vec<String>> {
    let Ok(hir) = regex_syntax::ParserBuilder::new().build().parse(pattern) else {
        return Vec::new();
    };
    let parts: Vec<&Hir> = match hir.kind() {
        HirKind::Concat(subs) => subs.iter().collect(),
        _ => vec![&hir],
    };
    let mut out = Vec::new();
    for part in parts {
        let mut extractor = Extractor::new();
        extractor.limit_total(MAX_WORDS);
        let seq = extractor.extract(part);
        let Some(lits) = seq.literals() else { continue };
        if lits.is_empty()
            || lits
                .iter()
                .any(|l| !l.is_exact() || l.as_bytes().is_empty())
        {
            continue;
        }
        let mut words: Vec<String> = lits
            .iter()
            .map(|l| String::from_utf8_lossy(l.as_bytes()).to_lowercase())
            .collect();
        words.sort();
        words.dedup();
        out.push(words);
        if out.len() == MAX_PARTS {
            break;
        }
    }
    out
}

/// The most words one needed part may have (more, and it is not looked for).
const MAX_WORDS: usize = 64;
/// The most needed parts one expression keeps.
const MAX_PARTS: usize = 64;

/// What the scan found of `rule` so far, made empty on first use; `slot` says where each
/// rule's entry is in `found` (`u32::MAX`: none yet).
fn entry<'a>(found: &'a mut Vec<(usize, Found)>, slot: &mut [u32], rule: usize) -> &'a mut Found {
    let i = match slot[rule] {
        u32::MAX => {
            found.push((rule, Found::default()));
            slot[rule] = (found.len() - 1) as u32;
            found.len() - 1
        }
        i => i as usize,
    };
    &mut found[i].1
}

/// Buffers a thread reuses from clause to clause (left clean after each).
#[derive(Default)]
struct Scratch {
    /// For each regular expression: the needed parts seen (zero when untouched).
    masks: Vec<u64>,
    /// The expressions whose mask is not zero.
    touched: Vec<usize>,
    /// For each rule: its entry in the clause's findings.
    slot: Vec<u32>,
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

/// The distinct literals (ASCII case aside, as the automaton matches them), each with every
/// rule and role it serves.
fn dedupe(
    literals: Vec<String>,
    roles: Vec<(usize, Role)>,
) -> (Vec<String>, Vec<Vec<(usize, Role)>>) {
    let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut unique = Vec::new();
    let mut by: Vec<Vec<(usize, Role)>> = Vec::new();
    for (lit, role) in literals.into_iter().zip(roles) {
        let key = lit.to_ascii_lowercase();
        let i = *index.entry(key).or_insert_with(|| {
            unique.push(lit);
            by.push(Vec::new());
            by.len() - 1
        });
        by[i].push(role);
    }
    (unique, by)
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
