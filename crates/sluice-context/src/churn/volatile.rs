//! What changed where two prefixes part: the kind of volatile token (a timestamp, a date, a
//! UUID, an id) read from the two tokens at the first differing byte, or whitespace alone.

/// Why two prompts that should share a prefix do not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cause {
    /// A time of day or a date with a time (ISO 8601, `HH:MM:SS`, Unix seconds).
    Timestamp,
    /// A date alone (`2026-12-01`, `01.12.2026`, a weekday or a month name).
    Date,
    /// A UUID.
    Uuid,
    /// Another id: a run of hex or letters and digits, at least 8 long, with digits.
    RequestId,
    /// Only whitespace differs from there on.
    Whitespace,
    /// The same tools in another order.
    ToolOrder,
    /// The same tools with their JSON keys in another order.
    KeyOrder,
}

impl Cause {
    /// The label in metrics and reports.
    pub fn label(self) -> &'static str {
        match self {
            Self::Timestamp => "timestamp",
            Self::Date => "date",
            Self::Uuid => "uuid",
            Self::RequestId => "request_id",
            Self::Whitespace => "whitespace",
            Self::ToolOrder => "tool_order",
            Self::KeyOrder => "key_order",
        }
    }
}

fn token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b':' | b'-' | b'_' | b'.' | b'+' | b'/')
}

/// The token of `text` around byte `at`: the longest run of letters, digits and `:-_.+/`,
/// without the punctuation it starts or ends with (a sentence's full stop).
pub fn token_at(text: &[u8], at: usize) -> &[u8] {
    let at = at.min(text.len());
    let mut start = text[..at]
        .iter()
        .rposition(|&b| !token_byte(b))
        .map_or(0, |i| i + 1);
    let mut end = text[at..]
        .iter()
        .position(|&b| !token_byte(b))
        .map_or(text.len(), |i| at + i);
    while end > start && !text[end - 1].is_ascii_alphanumeric() {
        end -= 1;
    }
    while start < end && !text[start].is_ascii_alphanumeric() {
        start += 1;
    }
    &text[start..end]
}

/// The token's shape: digits as `9`, letters as `a`, the rest kept (`9999-99-99a99:99:99a`):
/// what kind of token it is without what it says.
pub fn shape(token: &[u8]) -> String {
    token
        .iter()
        .take(48)
        .map(|&b| match b {
            b'0'..=b'9' => '9',
            b if b.is_ascii_alphabetic() => 'a',
            b => char::from(b),
        })
        .collect()
}

const WEEKDAYS: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];
const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

fn is_uuid(t: &[u8]) -> bool {
    t.len() == 36
        && t.iter().enumerate().all(|(i, &b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}

/// `9999-99-99` or `9999/99/99` at the start, or `99.99.9999`.
fn starts_with_date(t: &[u8]) -> bool {
    let s = shape(t);
    s.starts_with("9999-99-99")
        || s.starts_with("9999/99/99")
        || s.starts_with("99.99.9999")
        || s.starts_with("99/99/9999")
}

fn has_time(t: &[u8]) -> bool {
    shape(t).contains("99:99")
}

/// The kind of volatile token `t` is, if it is one.
pub fn kind(t: &[u8]) -> Option<Cause> {
    if t.is_empty() {
        return None;
    }
    if is_uuid(t) {
        return Some(Cause::Uuid);
    }
    if has_time(t) {
        return Some(Cause::Timestamp);
    }
    if starts_with_date(t) {
        return Some(Cause::Date);
    }
    let digits = t.iter().filter(|b| b.is_ascii_digit()).count();
    if digits == t.len() && (t.len() == 10 || t.len() == 13) {
        return Some(Cause::Timestamp); // Unix seconds or milliseconds
    }
    let lower = t.to_ascii_lowercase();
    let word = std::str::from_utf8(&lower).unwrap_or("");
    if WEEKDAYS.contains(&word) || MONTHS.contains(&word) {
        return Some(Cause::Date);
    }
    let id_like = t
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'));
    if id_like && t.len() >= 8 && digits >= 2 {
        return Some(Cause::RequestId);
    }
    None
}

/// Whether `line` holds a volatile token (a timestamp, a date, a UUID, an id).
pub fn holds_volatile(line: &str) -> bool {
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if token_byte(b[i]) {
            let t = token_at(b, i);
            if kind(t).is_some() {
                return true;
            }
            i += b[i..]
                .iter()
                .position(|&c| !token_byte(c))
                .unwrap_or(b.len() - i);
        } else {
            i += 1;
        }
    }
    false
}

/// Whether `a` and `b` differ only in whitespace.
pub fn same_but_whitespace(a: &[u8], b: &[u8]) -> bool {
    let strip = |s: &[u8]| -> Vec<u8> {
        s.iter()
            .copied()
            .filter(|b| !b.is_ascii_whitespace())
            .collect()
    };
    a != b && strip(a) == strip(b)
}

/// Why `a` and `b`, equal up to byte `at`, part there: the kind both tokens there share, or
/// whitespace; `None` when neither explains it (the text itself changed).
pub fn cause_at(a: &[u8], b: &[u8], at: usize) -> Option<(Cause, String)> {
    if same_but_whitespace(&a[at.min(a.len())..], &b[at.min(b.len())..]) {
        return Some((Cause::Whitespace, String::new()));
    }
    let (ta, tb) = (token_at(a, at), token_at(b, at));
    match (kind(ta), kind(tb)) {
        (Some(x), Some(y)) if x == y => Some((x, shape(ta))),
        // A date beside a timestamp: the token carries time either way.
        (Some(Cause::Timestamp | Cause::Date), Some(Cause::Timestamp | Cause::Date)) => {
            Some((Cause::Timestamp, shape(ta)))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cause(a: &str, b: &str) -> Option<Cause> {
        let at = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
        cause_at(a.as_bytes(), b.as_bytes(), at).map(|(c, _)| c)
    }

    #[test]
    fn volatile_tokens_are_named_by_kind() {
        let p = "You are a helpful assistant. ";
        let t = |x: &str| format!("{p}Current time: {x}. Answer briefly.");
        assert_eq!(
            cause(&t("2026-12-01T18:32:10Z"), &t("2026-12-01T18:33:02Z")),
            Some(Cause::Timestamp)
        );
        assert_eq!(
            cause(&t("18:32:10"), &t("18:40:01")),
            Some(Cause::Timestamp)
        );
        assert_eq!(
            cause(&t("1764613930"), &t("1764613999")),
            Some(Cause::Timestamp)
        );
        assert_eq!(cause(&t("2026-12-01"), &t("2026-12-02")), Some(Cause::Date));
        assert_eq!(cause(&t("Tuesday"), &t("Wednesday")), Some(Cause::Date));
        assert_eq!(
            cause(
                &t("0b9e8c1a-4f2d-4c3e-9a7b-1d2e3f4a5b6c"),
                &t("7c1d2e3f-0a9b-4c8d-8e7f-6a5b4c3d2e1f")
            ),
            Some(Cause::Uuid)
        );
        assert_eq!(
            cause(&t("req_8f3a91c2"), &t("req_11b0e7d4")),
            Some(Cause::RequestId)
        );
        assert_eq!(
            cause(
                &format!("{p}Answer  briefly."),
                &format!("{p}Answer briefly.")
            ),
            Some(Cause::Whitespace)
        );
        // A real change of instructions is not churn.
        assert_eq!(cause(&t("soon"), &t("later")), None);
        assert_eq!(cause("Be brief.", "Be thorough."), None);
    }

    #[test]
    fn a_token_is_read_around_the_offset_and_its_shape_keeps_no_text() {
        let text = b"time: 2026-12-01T18:32:10Z, then";
        assert_eq!(token_at(text, 12), b"2026-12-01T18:32:10Z");
        assert_eq!(shape(b"2026-12-01T18:32:10Z"), "9999-99-99a99:99:99a");
        assert_eq!(shape(b"Tuesday"), "aaaaaaa");
        assert_eq!(token_at(b"abc", 3), b"abc");
    }
}
