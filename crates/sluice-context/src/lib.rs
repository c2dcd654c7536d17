//! Context efficiency: what sluice decides about the prompt itself, apart from where it goes.
//! [`churn`] tells why requests that should share a cached prefix do not (a timestamp, a
//! date, an id, reordered tools or keys, whitespace), from a sample of their stable prefix,
//! never keeping or reporting the text.

pub mod churn;
pub mod normalise;
