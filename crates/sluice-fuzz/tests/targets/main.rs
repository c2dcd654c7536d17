//! The fuzz targets: each replays its corpus and checks inputs made from it (see the crate's
//! documentation). `SLUICE_FUZZ_CASES` sets how many; `scripts/fuzz` runs them longer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod bodies;
mod files;
mod headers;
mod streams;

#[global_allocator]
static ALLOCATOR: sluice_fuzz::Counting = sluice_fuzz::Counting;

use sluice_core::GatewayError;
use sluice_fuzz::{Bound, Target};

/// Runs `target` with `check`, failing the test with what was found.
fn fuzz(target: Target, check: impl Fn(&[u8]) -> Result<(), String>) {
    match sluice_fuzz::run(&target, check) {
        Ok(report) => eprintln!(
            "{}: {} seeds and {} inputs, nothing found",
            target.name, report.seeds, report.cases
        ),
        Err(found) => panic!("{found}"),
    }
}

/// A JSON target with the translation bound (every JSON target here reads one tree and
/// may write another).
const fn json(name: &'static str, words: &'static [&'static [u8]]) -> Target {
    Target {
        name,
        words,
        json: true,
        memory: Bound::TRANSLATION,
    }
}

/// Whether `text` is JSON as a client reads it: its grammar, whatever the range of its
/// numbers (a number past f64 is still JSON, passed on as the upstream wrote it) and its
/// depth (sluice's own parser stops at 128 levels; clients read deeper).
fn is_json(text: &[u8]) -> Result<(), String> {
    match serde_json::from_slice::<Box<serde_json::value::RawValue>>(text) {
        Ok(_) => Ok(()),
        Err(e) if e.to_string().starts_with("recursion limit exceeded") => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}

/// A client's mistake: a 4xx with a message (and the field, when one is at fault, as a
/// non-empty name).
fn refused_as_client(e: &GatewayError) -> Result<(), String> {
    let status = e.status();
    if !(400..500).contains(&status) {
        return Err(format!("refused with {status}, not a 4xx: {e}"));
    }
    if e.message.trim().is_empty() {
        return Err(format!("refused with {status} and no message"));
    }
    if e.param.as_deref().is_some_and(|p| p.trim().is_empty()) {
        return Err(format!("refused naming an empty field: {e}"));
    }
    Ok(())
}

/// Every event of `sse` (what sluice writes to a client) has JSON data or `[DONE]`.
fn well_formed_sse(sse: &[u8]) -> Result<(), String> {
    let mut parser = sluice_providers::sse::SseParser::new();
    let mut events = Vec::new();
    parser
        .push(sse, &mut events)
        .map_err(|e| format!("sluice wrote an SSE line too long: {e}"))?;
    for ev in &events {
        if ev.data.as_ref() != b"[DONE]" && is_json(&ev.data).is_err() {
            return Err(format!(
                "sluice wrote an event whose data is not JSON: {}",
                String::from_utf8_lossy(&ev.data)
            ));
        }
    }
    Ok(())
}
