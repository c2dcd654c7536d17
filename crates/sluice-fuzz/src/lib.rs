//! Hostile input for sluice's parsers, run as ordinary tests on the stable toolchain.
//!
//! Each target has a corpus of seeds kept in the repository (`corpus/<target>/`). A run
//! first replays every seed, then checks inputs made from them: byte edits with the target's
//! dictionary ([`edit`]), and, for JSON seeds, edits that keep the JSON well formed
//! ([`json`]) so the checks behind the parser are reached too. The check a target gives
//! says what its parser must do with anything (answer or refuse in its API's shape); the
//! harness adds that it must not panic and must not hold more memory at once than the
//! target's [`Bound`]. A failure is shrunk to a small input, saved beside the seeds so every
//! later run replays it, and reported.
//!
//! `SLUICE_FUZZ_CASES` sets the inputs per target (1,000 by default, a few seconds each);
//! `SLUICE_FUZZ_SEED` the random seed (0 by default, so a run is repeatable).

mod alloc;
pub mod edit;
pub mod json;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

pub use alloc::{Counting, peak_of};

/// The most memory one input may hold at once: `fixed` plus `per_byte` times its length.
#[derive(Clone, Copy, Debug)]
pub struct Bound {
    /// Bytes allowed whatever the input.
    pub fixed: usize,
    /// Bytes allowed per byte of input.
    pub per_byte: usize,
}

impl Bound {
    /// A JSON parser's: the tree of the most arrays and objects a body may open
    /// (`sluice_core::budget`, some 250 bytes each: 24 MiB) and 16 MiB of room, plus 64
    /// bytes a byte of input for the copies it makes.
    pub const PARSER: Self = Self {
        fixed: 40 << 20,
        per_byte: 64,
    };

    /// A translation's: the tree it reads and the tree it writes (each bounded as above).
    pub const TRANSLATION: Self = Self {
        fixed: 72 << 20,
        per_byte: 64,
    };

    fn of(self, len: usize) -> usize {
        self.fixed.saturating_add(self.per_byte.saturating_mul(len))
    }
}

/// One fuzzed parser.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    /// Its corpus folder under `corpus/`.
    pub name: &'static str,
    /// Words it knows, inserted by edits.
    pub words: &'static [&'static [u8]],
    /// Whether its seeds are JSON, whole or after a head and a blank line (then half the
    /// inputs keep that JSON well formed).
    pub json: bool,
    /// The memory one input may hold.
    pub memory: Bound,
}

/// What a run did.
#[derive(Debug)]
pub struct Report {
    /// Seeds replayed.
    pub seeds: usize,
    /// Inputs made from them and checked.
    pub cases: u32,
}

/// What a run found wrong.
#[derive(Debug, thiserror::Error)]
pub enum Found {
    /// The target's corpus could not be read, or is empty.
    #[error("{target}: the corpus at {path} {why}")]
    Corpus {
        /// The target.
        target: &'static str,
        /// Its folder.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// An input the check refused, shrunk, with where it was saved.
    #[error("{target}: {why}\n  input ({len} bytes, saved to {saved}): {shown}")]
    Failure {
        /// The target.
        target: &'static str,
        /// What the check said, or the panic's message.
        why: String,
        /// The input's length.
        len: usize,
        /// The input, escaped.
        shown: String,
        /// Where it was saved (or why it was not).
        saved: String,
    },
}

/// The corpus folder of `target`.
pub fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target)
}

fn seeds(t: &Target) -> Result<Vec<(String, Vec<u8>)>, Found> {
    let dir = corpus_dir(t.name);
    let fail = |why: String| Found::Corpus {
        target: t.name,
        path: dir.clone(),
        why,
    };
    let mut out = Vec::new();
    let entries = std::fs::read_dir(&dir).map_err(|e| fail(format!("cannot be read: {e}")))?;
    for entry in entries {
        let path = entry.map_err(|e| fail(e.to_string()))?.path();
        let bytes = std::fs::read(&path).map_err(|e| fail(format!("{}: {e}", path.display())))?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        out.push((name.unwrap_or_default(), bytes));
    }
    out.sort();
    if out.is_empty() {
        return Err(fail("holds no seed".into()));
    }
    Ok(out)
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// A seed's JSON: the whole of it, or what follows its first blank line (a request written
/// as its head, a blank line and its body), with the head before it.
fn tree(seed: &[u8]) -> Option<(Vec<u8>, serde_json::Value)> {
    if let Ok(v) = serde_json::from_slice(seed) {
        return Some((Vec::new(), v));
    }
    let split = seed.windows(2).position(|w| w == b"\n\n")? + 2;
    let v = serde_json::from_slice(&seed[split..]).ok()?;
    Some((seed[..split].to_vec(), v))
}

fn inputs(t: &Target, seeds: &[Vec<u8>]) -> BoxedStrategy<Vec<u8>> {
    let words = t.words;
    let raw = Arc::new(seeds.to_vec());
    let bytes = (any::<Index>(), prop::collection::vec(edit::edit(), 1..8))
        .prop_map(move |(i, edits)| {
            let mut b = raw[i.index(raw.len())].clone();
            for e in &edits {
                edit::apply(&mut b, e, words);
            }
            b
        })
        .boxed();
    let trees: Vec<(Vec<u8>, serde_json::Value)> = seeds.iter().filter_map(|s| tree(s)).collect();
    if !t.json || trees.is_empty() {
        return bytes;
    }
    let trees = Arc::new(trees);
    let shaped = (
        any::<Index>(),
        prop::collection::vec(json::edit(), 1..6),
        prop::collection::vec(edit::edit(), 0..2),
    )
        .prop_map(move |(i, tree_edits, byte_edits)| {
            let (head, mut tree) = trees[i.index(trees.len())].clone();
            for e in &tree_edits {
                json::apply(&mut tree, e, words);
            }
            let mut b = head;
            b.extend_from_slice(tree.to_string().as_bytes());
            for e in &byte_edits {
                edit::apply(&mut b, e, words);
            }
            b
        })
        .boxed();
    prop_oneof![bytes, shaped].boxed()
}

thread_local! {
    /// Whether this thread is running a check (whose panics the harness reports itself).
    static JUDGING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Keeps the panic hook quiet while a check runs: the harness reports what a check's panic
/// said, and a parser that catches its own panics would otherwise fill the log with them.
fn quiet_checks() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !JUDGING.with(std::cell::Cell::get) {
                previous(info);
            }
        }));
    });
}

/// `check` on `input` under the harness's rules: no panic, memory within `bound`.
fn judged(
    input: &[u8],
    bound: Bound,
    check: &dyn Fn(&[u8]) -> Result<(), String>,
) -> Result<(), String> {
    JUDGING.with(|j| j.set(true));
    let (outcome, peak) = peak_of(|| catch_unwind(AssertUnwindSafe(|| check(input))));
    JUDGING.with(|j| j.set(false));
    let verdict = match outcome {
        Ok(v) => v,
        Err(panic) => {
            let said = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_string()));
            Err(format!("panicked: {}", said.unwrap_or_default()))
        }
    };
    verdict?;
    let most = bound.of(input.len());
    if peak > most {
        return Err(format!(
            "held {peak} bytes at once for {} bytes of input (bound {most})",
            input.len()
        ));
    }
    Ok(())
}

fn escaped(input: &[u8]) -> String {
    let shown: String = input.escape_ascii().to_string();
    if shown.len() > 2000 {
        format!("{}... ({} more)", &shown[..2000], shown.len() - 2000)
    } else {
        shown
    }
}

fn failure(t: &Target, why: String, input: &[u8]) -> Found {
    let hash = input.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    });
    let path = corpus_dir(t.name).join(format!("found-{hash:016x}"));
    let saved = match std::fs::write(&path, input) {
        Ok(()) => path.display().to_string(),
        Err(e) => format!("nowhere ({e})"),
    };
    Found::Failure {
        target: t.name,
        why,
        len: input.len(),
        shown: escaped(input),
        saved,
    }
}

/// Replays `t`'s corpus, then checks `SLUICE_FUZZ_CASES` inputs made from it with `check`:
/// `Ok` means nothing panicked, every input stayed within the memory bound, and `check`
/// accepted what the parser did with each.
pub fn run(t: &Target, check: impl Fn(&[u8]) -> Result<(), String>) -> Result<Report, Found> {
    quiet_checks();
    let seeds = seeds(t)?;
    for (name, seed) in &seeds {
        judged(seed, t.memory, &check)
            .map_err(|why| failure(t, format!("seed {name}: {why}"), seed))?;
    }
    let cases = u32::try_from(env_number("SLUICE_FUZZ_CASES", 1000)).unwrap_or(u32::MAX);
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&env_number("SLUICE_FUZZ_SEED", 0).to_le_bytes());
    for (k, b) in key[8..].iter_mut().zip(t.name.bytes()) {
        *k = b;
    }
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 2000,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &key));
    let raw: Vec<Vec<u8>> = seeds.into_iter().map(|(_, b)| b).collect();
    let strategy = inputs(t, &raw);
    let outcome = runner.run(&strategy, |input| {
        judged(&input, t.memory, &check).map_err(TestCaseError::fail)
    });
    match outcome {
        Ok(()) => Ok(Report {
            seeds: raw.len(),
            cases,
        }),
        Err(TestError::Fail(why, input)) => Err(failure(t, why.to_string(), &input)),
        Err(TestError::Abort(why)) => Err(Found::Corpus {
            target: t.name,
            path: corpus_dir(t.name),
            why: format!("gave inputs the runner gave up on: {why}"),
        }),
    }
}
