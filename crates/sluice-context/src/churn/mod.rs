//! Prefix churn: requests of one tenant and model group that should share a cached prefix
//! (their tool list and system prompt, which providers cache first) but do not, and why.
//!
//! A sampled request's stable section (its `tools` as sent, then its leading system
//! messages) is compared with the few last kept for its tenant and group: with the one it
//! shares the longest prefix with. Identical: shared. Parting inside the tools: the same
//! tools reordered, or the same tools with their keys reordered, or whitespace. Parting
//! inside the system prompt: the kind of token both hold there ([`volatile`]: a timestamp,
//! a date, a UUID, an id) or whitespace alone. Anything else is a real change of prompt,
//! not churn. What is kept is a few kilobytes of the section per tenant and group, to compare
//! against; what is reported is counts, the offset and the token's shape, never the text.

pub mod volatile;

use std::collections::{BTreeMap, VecDeque};

use hashbrown::HashMap;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use sluice_core::ChatRequest;

pub use volatile::Cause;

/// The longest stable section kept of a sample: churn that matters falls early.
pub const SAMPLE_BYTES: usize = 4096;
/// Samples kept per tenant and group.
pub const SAMPLES_KEPT: usize = 4;
/// Tenants and groups watched at most (later ones are not, and are counted).
pub const KEYS_KEPT: usize = 2000;

/// A request's stable section: its tools as sent, then its leading system messages' text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sample {
    text: Vec<u8>,
    tools_len: usize,
}

#[derive(Deserialize)]
struct Head<'a> {
    #[serde(default)]
    role: Option<&'a str>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
}

fn push_text(out: &mut Vec<u8>, content: &RawValue) {
    match serde_json::from_str::<Value>(content.get()) {
        Ok(Value::String(s)) => out.extend_from_slice(s.as_bytes()),
        Ok(Value::Array(parts)) => {
            for p in parts {
                if let Some(t) = p.get("text").and_then(Value::as_str) {
                    out.extend_from_slice(t.as_bytes());
                }
            }
        }
        _ => {}
    }
}

impl Sample {
    /// The stable section of `request`; `None` when it has neither tools nor a system prompt
    /// (nothing a provider would cache across requests).
    pub fn of(request: &ChatRequest) -> Option<Self> {
        let mut text = Vec::new();
        if let Some(tools) = request.field("tools") {
            text.extend_from_slice(tools);
        }
        let tools_len = text.len();
        if let Some(raw) = request.field("messages")
            && let Ok(messages) = serde_json::from_slice::<Vec<Head<'_>>>(raw)
        {
            for m in messages
                .iter()
                .take_while(|m| matches!(m.role, Some("system" | "developer")))
            {
                text.push(b'\n');
                if let Some(c) = m.content {
                    push_text(&mut text, c);
                }
                if text.len() >= SAMPLE_BYTES {
                    break;
                }
            }
        }
        if let Some(system) = request.field("system")
            && let Ok(raw) = serde_json::from_slice::<&RawValue>(system)
        {
            text.push(b'\n');
            push_text(&mut text, raw);
        }
        if text.len() == tools_len && tools_len == 0 {
            return None;
        }
        text.truncate(SAMPLE_BYTES);
        Some(Self {
            text,
            tools_len: tools_len.min(SAMPLE_BYTES),
        })
    }

    /// The stable section's bytes (tools as sent, then the leading system messages).
    pub fn text(&self) -> &[u8] {
        &self.text
    }

    /// A sample of `text` whose first `tools_len` bytes are the tools (for tests).
    pub fn from_parts(text: &[u8], tools_len: usize) -> Self {
        Self {
            text: text[..text.len().min(SAMPLE_BYTES)].to_vec(),
            tools_len: tools_len.min(SAMPLE_BYTES),
        }
    }
}

/// What one sampled request showed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The first of its tenant and group.
    First,
    /// Its stable section is one already seen.
    Shared,
    /// It differs in what it says: another prompt, not churn.
    Changed,
    /// It should have shared a prefix and did not, for `cause`, at byte `offset` of the
    /// section; `shape` is the volatile token's (digits as 9, letters as a).
    Churn {
        /// Why.
        cause: Cause,
        /// Where the prefixes part.
        offset: usize,
        /// The token's shape.
        shape: String,
    },
}

/// One cause's count and its latest example.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Churned {
    /// Requests it cost a shared prefix.
    pub count: u64,
    /// Where the latest parted, in bytes of the stable section.
    pub example_offset: usize,
    /// The latest token's shape.
    pub shape: String,
}

/// What a tenant and group's sampled requests showed.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Tally {
    /// Requests sampled.
    pub sampled: u64,
    /// Of which sharing a stable section seen before.
    pub shared: u64,
    /// Of which saying something else.
    pub changed: u64,
    /// Of which churn, by cause.
    pub churn: BTreeMap<&'static str, Churned>,
}

#[derive(Debug, Default)]
struct Kept {
    samples: VecDeque<Sample>,
    tally: Tally,
}

/// Every watched tenant and group.
#[derive(Debug, Default)]
pub struct Watch {
    keys: HashMap<(Box<str>, Box<str>), Kept>,
    /// Samples of tenants and groups beyond [`KEYS_KEPT`], not watched.
    pub overflow: u64,
}

fn lcp(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// `v` with every object's keys in sorted order.
pub(crate) fn sorted_keys(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let mut out = Map::new();
            for k in keys {
                out.insert(k.clone(), sorted_keys(&m[k]));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted_keys).collect()),
        other => other.clone(),
    }
}

/// Why two tool lists that part differ, when it is churn.
fn tools_cause(a: &[u8], b: &[u8]) -> Option<Cause> {
    if volatile::same_but_whitespace(a, b) {
        return Some(Cause::Whitespace);
    }
    let (Ok(Value::Array(x)), Ok(Value::Array(y))) = (
        serde_json::from_slice::<Value>(a),
        serde_json::from_slice::<Value>(b),
    ) else {
        return None;
    };
    let canon =
        |v: &[Value]| -> Vec<String> { v.iter().map(|t| sorted_keys(t).to_string()).collect() };
    let (cx, cy) = (canon(&x), canon(&y));
    if cx == cy {
        return Some(Cause::KeyOrder);
    }
    let (mut sx, mut sy) = (cx, cy);
    sx.sort();
    sy.sort();
    (sx == sy).then_some(Cause::ToolOrder)
}

/// What `new` shows against `old`, the kept sample it shares the longest prefix with.
fn judge(old: &Sample, new: &Sample) -> Verdict {
    let at = lcp(&old.text, &new.text);
    if at == old.text.len() && at == new.text.len() {
        return Verdict::Shared;
    }
    if at < old.tools_len && at < new.tools_len {
        let (a, b) = (&old.text[..old.tools_len], &new.text[..new.tools_len]);
        return match tools_cause(a, b) {
            Some(cause) => Verdict::Churn {
                cause,
                offset: at,
                shape: String::new(),
            },
            None => Verdict::Changed,
        };
    }
    match volatile::cause_at(&old.text, &new.text, at) {
        Some((cause, shape)) => Verdict::Churn {
            cause,
            offset: at,
            shape,
        },
        None => Verdict::Changed,
    }
}

impl Watch {
    /// An empty watch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Judges `sample`, a request of `tenant` in `group`, against the last few kept, and
    /// keeps it.
    pub fn observe(&mut self, tenant: &str, group: &str, sample: Sample) -> Verdict {
        if self.keys.len() >= KEYS_KEPT && !self.keys.contains_key(&(tenant.into(), group.into())) {
            self.overflow += 1;
            return Verdict::First;
        }
        let kept = self.keys.entry((tenant.into(), group.into())).or_default();
        kept.tally.sampled += 1;
        let best = kept
            .samples
            .iter()
            .enumerate()
            .max_by_key(|(i, s)| (lcp(&s.text, &sample.text), std::cmp::Reverse(*i)))
            .map(|(i, _)| i);
        let verdict = match best {
            None => Verdict::First,
            Some(i) => judge(&kept.samples[i], &sample),
        };
        match &verdict {
            Verdict::First => {}
            Verdict::Shared => kept.tally.shared += 1,
            Verdict::Changed => kept.tally.changed += 1,
            Verdict::Churn {
                cause,
                offset,
                shape,
            } => {
                let c = kept.tally.churn.entry(cause.label()).or_default();
                c.count += 1;
                c.example_offset = *offset;
                c.shape.clone_from(shape);
            }
        }
        if let (Verdict::Shared, Some(i)) = (&verdict, best) {
            // Seen again: the most recent.
            if let Some(s) = kept.samples.remove(i) {
                kept.samples.push_front(s);
            }
        } else {
            kept.samples.push_front(sample);
            kept.samples.truncate(SAMPLES_KEPT);
        }
        verdict
    }

    /// Every tenant and group's tally, in order.
    pub fn report(&self) -> Vec<(&str, &str, &Tally)> {
        let mut v: Vec<_> = self
            .keys
            .iter()
            .map(|((t, g), k)| (&**t, &**g, &k.tally))
            .collect();
        v.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        v
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.keys.clear();
        self.overflow = 0;
    }
}

#[cfg(test)]
mod tests;
