//! The rule set sluice ships (`rules/contract-risks.toml`: about 200 rules for common contract
//! risks, in English and Chinese), and a generator that grows it to any size for measuring how
//! the engine scales: each generated rule is a variant of a shipped one, with literals of its
//! own and regular expressions of other bounds, so that the automaton and the regex engine
//! really grow.

use crate::LoadError;
use crate::spec::{RuleSpec, parse};

/// The shipped rule file.
pub const CONTRACT_RISKS: &str = include_str!("../rules/contract-risks.toml");

/// Words a generated variant adds to a shipped rule's English literals.
const QUALIFIERS_EN: [&str; 12] = [
    "hereunder",
    "thereof",
    "herein",
    "in writing",
    "in full",
    "forthwith",
    "jointly",
    "severally",
    "as amended",
    "in aggregate",
    "in any event",
    "from time to time",
];
/// What a generated variant puts before a shipped rule's Chinese literals.
const QUALIFIERS_ZH: [&str; 12] = [
    "本合同项下",
    "依照本条",
    "双方确认",
    "书面",
    "全部",
    "立即",
    "共同",
    "各自",
    "经修订",
    "累计",
    "在任何情况下",
    "不时",
];

/// The shipped rules.
pub fn contract_risks() -> Result<Vec<RuleSpec>, LoadError> {
    parse(CONTRACT_RISKS)
}

/// `n` rules: the shipped ones first, then variants of them (`ID-vK`) until there are `n`.
pub fn generated(n: usize) -> Result<Vec<RuleSpec>, LoadError> {
    let shipped = contract_risks()?;
    let mut out: Vec<RuleSpec> = shipped.iter().take(n).cloned().collect();
    let mut i = out.len();
    while out.len() < n && !shipped.is_empty() {
        let base = &shipped[i % shipped.len()];
        let k = i / shipped.len();
        out.push(variant(base, k));
        i += 1;
    }
    Ok(out)
}

/// Variant `k` of rule `base`.
fn variant(base: &RuleSpec, k: usize) -> RuleSpec {
    let chinese = base.id.starts_with("zh-");
    let q = if chinese {
        QUALIFIERS_ZH[k % QUALIFIERS_ZH.len()]
    } else {
        QUALIFIERS_EN[k % QUALIFIERS_EN.len()]
    };
    let qualify = |s: &String| {
        if chinese {
            format!("{q}{s}")
        } else {
            format!("{s} {q}")
        }
    };
    let mut r = base.clone();
    r.id = format!("{}-v{k}", base.id);
    r.keywords = base.keywords.iter().map(qualify).collect();
    r.phrases = base.phrases.iter().map(qualify).collect();
    // The same shapes with other gaps: `.{0,120}` becomes `.{0,113}` and so on.
    r.regex = base.regex.iter().map(|p| widen(p, k)).collect();
    if let Some(near) = &mut r.near {
        near.within += k % 7;
    }
    r.unless.push(if chinese {
        format!("除外情形{k}")
    } else {
        format!("save as provided in schedule {k}")
    });
    r
}

/// `pattern` with each bounded gap `{0,N}` made `{0,N-k%N}` (at least 1).
fn widen(pattern: &str, k: usize) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut rest = pattern;
    while let Some(at) = rest.find("{0,") {
        out.push_str(&rest[..at + 3]);
        rest = &rest[at + 3..];
        let end = rest.find('}').unwrap_or(0);
        match rest[..end].parse::<usize>() {
            Ok(n) => {
                let m = n.saturating_sub(k % n.max(1)).max(1);
                out.push_str(&m.to_string());
            }
            Err(_) => out.push_str(&rest[..end]),
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}
