//! Identifiers: the request id that follows a call through logs, headers and records.

use std::fmt;
use std::sync::Arc;

/// Longest client-supplied request id sluice accepts; longer ones are replaced.
const MAX_CLIENT_ID_LEN: usize = 128;

/// A request id: taken from the client's `x-request-id` when it is sane, generated otherwise.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RequestId(Arc<str>);

impl RequestId {
    /// A fresh, time-ordered id (UUID v7).
    pub fn generate() -> Self {
        Self(Arc::from(uuid::Uuid::now_v7().to_string()))
    }

    /// Uses the client's id when it is 1 to 128 visible ASCII characters, else generates one.
    ///
    /// Visible ASCII keeps the id safe to echo in a header and to write in a log line.
    pub fn from_client_or_generate(client: Option<&str>) -> Self {
        match client {
            Some(id) if Self::acceptable(id) => Self(Arc::from(id)),
            _ => Self::generate(),
        }
    }

    /// The id `id` names, when it is one sluice could have given (1 to 128 visible ASCII
    /// characters).
    pub fn named(id: &str) -> Option<Self> {
        Self::acceptable(id).then(|| Self(Arc::from(id)))
    }

    fn acceptable(id: &str) -> bool {
        !id.is_empty() && id.len() <= MAX_CLIENT_ID_LEN && id.bytes().all(|b| b.is_ascii_graphic())
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id as shared text, without copying it.
    pub fn shared(&self) -> Arc<str> {
        self.0.clone()
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_a_sane_client_id() {
        assert_eq!(
            RequestId::from_client_or_generate(Some("abc-123")).as_str(),
            "abc-123"
        );
    }

    #[test]
    fn replaces_ids_that_are_empty_long_or_unprintable() {
        for bad in ["", "has space", "tab\there", &"x".repeat(129), "é"] {
            let id = RequestId::from_client_or_generate(Some(bad));
            assert_ne!(id.as_str(), bad);
            assert_eq!(id.as_str().len(), 36, "a generated uuid");
        }
    }

    #[test]
    fn generated_ids_differ() {
        assert_ne!(RequestId::generate(), RequestId::generate());
    }
}
