//! W3C Trace Context: reading a client's `traceparent` and `tracestate`, and writing the
//! `traceparent` sluice sends upstream for each attempt.
//!
//! `traceparent` is `{version}-{trace-id}-{parent-id}-{flags}` in lowercase hex (2, 32, 16
//! and 2 digits). Version `ff` is invalid; an all-zero trace id or parent id is invalid; a
//! version above `00` may carry more after the flags, which is ignored. Bit 0 of the flags
//! says the trace is sampled. When `traceparent` does not parse, `tracestate` is not read.

/// The client's place in a trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parent {
    /// The trace.
    pub trace_id: u128,
    /// The client's span.
    pub span_id: u64,
    /// Whether the client sampled the trace.
    pub sampled: bool,
    /// The client's `tracestate`, when it sent one that is well formed.
    pub state: Option<String>,
}

/// The most list members a `tracestate` may have.
const MAX_MEMBERS: usize = 32;
/// The longest `tracestate` passed on (32 members of the longest key and a short value fit).
const MAX_STATE: usize = 8192;

/// Reads `traceparent` (and, when it is valid, `tracestate`); `None` when `traceparent` is
/// absent or not valid, so the call starts a trace of its own.
pub fn parse(traceparent: &[u8], tracestate: Option<&[u8]>) -> Option<Parent> {
    let t = std::str::from_utf8(traceparent).ok()?.trim();
    let mut parts = t.split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let version = hex_exact(version, 2)? as u8;
    if version == 0xff || (version == 0 && parts.next().is_some()) {
        return None;
    }
    let trace_id = hex_exact(trace, 32)?;
    let span_id = u64::try_from(hex_exact(span, 16)?).ok()?;
    let flags = hex_exact(flags, 2)? as u8;
    if trace_id == 0 || span_id == 0 {
        return None;
    }
    Some(Parent {
        trace_id,
        span_id,
        sampled: flags & 1 == 1,
        state: tracestate.and_then(state),
    })
}

/// `digits` lowercase hex digits exactly, as a number.
fn hex_exact(s: &str, digits: usize) -> Option<u128> {
    if s.len() != digits || !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    u128::from_str_radix(s, 16).ok()
}

/// A `tracestate` worth passing on: printable ASCII, at most 32 members each `key=value`,
/// and not too long; anything else is dropped (not repaired).
fn state(raw: &[u8]) -> Option<String> {
    let s = std::str::from_utf8(raw).ok()?.trim();
    if s.is_empty() || s.len() > MAX_STATE || !s.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return None;
    }
    let members: Vec<&str> = s
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .collect();
    if members.is_empty() || members.len() > MAX_MEMBERS {
        return None;
    }
    let well_formed = members.iter().all(|m| {
        m.split_once('=')
            .is_some_and(|(k, v)| !k.is_empty() && !v.is_empty() && !k.contains(' '))
    });
    well_formed.then(|| members.join(","))
}

/// The `traceparent` of span `span_id` in trace `trace_id`: version `00`, sampled or not
/// (55 bytes of lowercase hex and dashes, written without the formatting machinery: one is
/// made for every attempt of a traced call).
pub fn traceparent(trace_id: u128, span_id: u64, sampled: bool) -> [u8; 55] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = *b"00-00000000000000000000000000000000-0000000000000000-00";
    for (i, slot) in out[3..35].iter_mut().enumerate() {
        *slot = HEX[((trace_id >> (124 - 4 * i)) & 0xf) as usize];
    }
    for (i, slot) in out[36..52].iter_mut().enumerate() {
        *slot = HEX[((span_id >> (60 - 4 * i)) & 0xf) as usize];
    }
    if sampled {
        out[54] = b'1';
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn reads_the_specs_example() {
        let p = parse(
            EXAMPLE.as_bytes(),
            Some(b"congo=t61rcWkgMzE, rojo=00f067aa0ba902b7"),
        )
        .unwrap();
        assert_eq!(p.trace_id, 0x4bf92f3577b34da6a3ce929d0e0e4736);
        assert_eq!(p.span_id, 0x00f067aa0ba902b7);
        assert!(p.sampled);
        assert_eq!(
            p.state.as_deref(),
            Some("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
        );
        assert_eq!(
            &traceparent(p.trace_id, p.span_id, p.sampled)[..],
            EXAMPLE.as_bytes()
        );
        let unsampled = traceparent(1, u64::MAX, false);
        assert_eq!(
            &unsampled[..],
            b"00-00000000000000000000000000000001-ffffffffffffffff-00"
        );
    }

    #[test]
    fn the_sampled_flag_is_bit_zero() {
        let p = parse(
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
            None,
        )
        .unwrap();
        assert!(!p.sampled);
        let p = parse(
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03",
            None,
        )
        .unwrap();
        assert!(p.sampled);
        let p = parse(
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-02",
            None,
        )
        .unwrap();
        assert!(!p.sampled);
    }

    #[test]
    fn refuses_what_the_spec_calls_invalid() {
        for bad in [
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "",
        ] {
            assert_eq!(parse(bad.as_bytes(), Some(b"a=b")), None, "{bad}");
        }
    }

    #[test]
    fn a_later_version_may_carry_more() {
        let p = parse(
            b"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes-next",
            None,
        )
        .unwrap();
        assert_eq!(p.span_id, 0x00f067aa0ba902b7);
    }

    #[test]
    fn a_malformed_tracestate_is_dropped_not_repaired() {
        let parse_state = |s: &str| parse(EXAMPLE.as_bytes(), Some(s.as_bytes())).unwrap().state;
        assert_eq!(parse_state("novalue"), None);
        assert_eq!(parse_state("a=1,=2"), None);
        assert_eq!(parse_state("a=\u{7f}"), None);
        let many = (0..33)
            .map(|i| format!("k{i}=v"))
            .collect::<Vec<_>>()
            .join(",");
        assert_eq!(parse_state(&many), None);
        let enough = (0..32)
            .map(|i| format!("k{i}=v"))
            .collect::<Vec<_>>()
            .join(",");
        assert_eq!(parse_state(&enough).as_deref(), Some(enough.as_str()));
        assert_eq!(parse_state("  "), None);
    }
}
