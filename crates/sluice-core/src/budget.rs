//! How much structure a JSON body may have: at most [`MAX_CONTAINERS`] arrays and objects
//! opened. A parser that builds a tree spends some 100 bytes on each one however few bytes
//! open it (`[[[]]]`), so a body within the size limit could otherwise cost a hundred times
//! its size in memory; counted before any parse (brackets inside strings count too: the
//! bound is on the high side), it costs a scan of the bytes.

/// The most arrays and objects a body may open: far more than any real request or answer
/// (a thousand messages with tool calls and two hundred tool schemas open some 20,000).
pub const MAX_CONTAINERS: usize = 100_000;

/// Whether `json` opens at most [`MAX_CONTAINERS`] arrays and objects.
pub fn within(json: &[u8]) -> bool {
    memchr::memchr2_iter(b'[', b'{', json)
        .take(MAX_CONTAINERS + 1)
        .count()
        <= MAX_CONTAINERS
}

/// What a refusal for a body past the bound says.
pub fn refusal(what: &str) -> String {
    format!("{what} opens more than {MAX_CONTAINERS} JSON arrays and objects")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_may_open_so_many_containers_and_no_more() {
        assert!(within(br#"{"messages":[{"role":"user","content":"hi"}]}"#));
        let at = "[".repeat(MAX_CONTAINERS);
        assert!(within(at.as_bytes()));
        let past = "{".repeat(MAX_CONTAINERS + 1);
        assert!(!within(past.as_bytes()));
    }
}
