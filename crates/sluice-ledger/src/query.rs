//! What `/admin/usage` and `sluice usage` ask the ledger: a time range, perhaps one tenant,
//! and the columns to total by; and the totals they get back.

use serde::Serialize;

/// A column usage can be totalled by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    /// The tenant.
    Tenant,
    /// The API key's name.
    Key,
    /// The model group clients asked for.
    Group,
    /// The upstream model (what prices are keyed by).
    Model,
    /// The deployment that answered.
    Upstream,
    /// The UTC day.
    Day,
}

impl GroupBy {
    /// Every choice, in the order they are listed in errors.
    pub const ALL: [GroupBy; 6] = [
        Self::Tenant,
        Self::Key,
        Self::Group,
        Self::Model,
        Self::Upstream,
        Self::Day,
    ];

    /// The name clients use.
    pub fn name(self) -> &'static str {
        match self {
            Self::Tenant => "tenant",
            Self::Key => "key",
            Self::Group => "group",
            Self::Model => "model",
            Self::Upstream => "upstream",
            Self::Day => "day",
        }
    }

    /// The ledger column it reads.
    pub(crate) fn column(self) -> &'static str {
        match self {
            Self::Tenant => "tenant",
            Self::Key => "api_key",
            Self::Group => "model_group",
            Self::Model => "model",
            Self::Upstream => "upstream",
            Self::Day => "day",
        }
    }

    /// Parses a comma-separated list (`tenant,model`); empty means no grouping.
    pub fn parse_list(s: &str) -> Result<Vec<GroupBy>, QueryError> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let g = Self::ALL
                .into_iter()
                .find(|g| g.name() == part)
                .ok_or_else(|| QueryError::GroupBy(part.to_string()))?;
            if !out.contains(&g) {
                out.push(g);
            }
        }
        Ok(out)
    }
}

/// A usage question the caller got wrong.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum QueryError {
    /// `group_by` named an unknown column.
    #[error("group_by: unknown column {0:?}; use any of tenant, key, group, model, upstream, day")]
    GroupBy(String),
    /// A time bound is not a date or timestamp.
    #[error(
        "{field}: {value:?} is not a time; use YYYY-MM-DD, YYYY-MM-DDTHH:MM:SSZ or Unix milliseconds"
    )]
    Time {
        /// `from` or `to`.
        field: &'static str,
        /// What was given.
        value: String,
    },
    /// `from` is not before `to`.
    #[error("from must be before to")]
    EmptyRange,
}

/// Which calls to total, and by what.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UsageQuery {
    /// Only this tenant's calls.
    pub tenant: Option<String>,
    /// Calls that arrived at or after this Unix time (ms).
    pub from_ms: Option<i64>,
    /// Calls that arrived before this Unix time (ms).
    pub to_ms: Option<i64>,
    /// The columns to total by, in order; none gives one grand total.
    pub group_by: Vec<GroupBy>,
}

impl UsageQuery {
    /// A query from its text parts, as `/admin/usage` and `sluice usage` take them.
    pub fn parse(
        tenant: Option<&str>,
        from: Option<&str>,
        to: Option<&str>,
        group_by: Option<&str>,
    ) -> Result<Self, QueryError> {
        let from_ms = from.map(|v| parse_time("from", v)).transpose()?;
        let to_ms = to.map(|v| parse_time("to", v)).transpose()?;
        if let (Some(f), Some(t)) = (from_ms, to_ms)
            && f >= t
        {
            return Err(QueryError::EmptyRange);
        }
        Ok(Self {
            tenant: tenant.filter(|t| !t.is_empty()).map(str::to_string),
            from_ms,
            to_ms,
            group_by: GroupBy::parse_list(group_by.unwrap_or(""))?,
        })
    }
}

/// `YYYY-MM-DD` (midnight UTC), `YYYY-MM-DDTHH:MM:SSZ`, or Unix milliseconds.
pub fn parse_time(field: &'static str, value: &str) -> Result<i64, QueryError> {
    let bad = || QueryError::Time {
        field,
        value: value.to_string(),
    };
    if let Ok(ms) = value.parse::<i64>() {
        return Ok(ms);
    }
    let (date, time) = match value.split_once('T') {
        Some((d, t)) => (d, Some(t.strip_suffix('Z').ok_or_else(bad)?)),
        None => (value, None),
    };
    let mut d = date.splitn(3, '-').map(|p| p.parse::<u32>().ok());
    let (Some(Some(y)), Some(Some(m)), Some(Some(day))) = (d.next(), d.next(), d.next()) else {
        return Err(bad());
    };
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) || date.len() != 10 {
        return Err(bad());
    }
    let mut secs = 0i64;
    if let Some(t) = time {
        let mut p = t.splitn(3, ':').map(|p| p.parse::<i64>().ok());
        let (Some(Some(h)), Some(Some(mi)), Some(Some(s))) = (p.next(), p.next(), p.next()) else {
            return Err(bad());
        };
        if !(0..24).contains(&h) || !(0..60).contains(&mi) || !(0..61).contains(&s) {
            return Err(bad());
        }
        secs = h * 3600 + mi * 60 + s;
    }
    let days = sluice_core::calendar::days_from_civil(i64::from(y), m, day);
    Ok((days * 86_400 + secs) * 1000)
}

/// Totals of the calls sharing one value of each grouped column.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct UsageRow {
    /// The grouped columns' values, in the query's order (`None` where a call had none).
    pub keys: Vec<Option<String>>,
    /// Calls.
    pub requests: u64,
    /// Calls that failed.
    pub errors: u64,
    /// Input tokens.
    pub prompt_tokens: u64,
    /// Of which read from a provider's prompt cache.
    pub cached_tokens: u64,
    /// Of which written to it.
    pub cache_write_tokens: u64,
    /// Output tokens.
    pub completion_tokens: u64,
    /// Of which reasoning.
    pub reasoning_tokens: u64,
    /// Cost in micro-units (hedges and retries included).
    pub cost_micros: u64,
    /// What caching saved, in micro-units: providers' prompt caches, and answers served
    /// from sluice's answer cache (each at what it cost when first bought).
    pub saved_micros: i64,
    /// What hedges and retries that did not answer cost, in micro-units.
    pub extra_micros: u64,
    /// Hedges sent.
    pub hedges: u64,
    /// Retries sent.
    pub retries: u64,
    /// Calls served partly (a provider's prompt cache) or wholly (the answer cache) from a
    /// cache.
    pub cache_hits: u64,
    /// Would-be semantic hits asked upstream to verify their entry.
    pub verifications: u64,
    /// What those calls cost, in micro-units (included in `cost_micros`).
    pub verification_micros: u64,
    /// Calls answered by meaning (semantic hits).
    pub semantic_hits: u64,
    /// What those answers cost when first bought, in micro-units (in `saved_micros`).
    pub semantic_saved_micros: i64,
    /// Of `saved_micros`, what providers' prompt caches saved (less write premiums).
    pub prompt_cache_saved_micros: i64,
    /// Calls whose cost is not known (an unpriced model worked on them): not in
    /// `cost_micros`, counted here so that a total is never silently short.
    pub unpriced_calls: u64,
    /// Answers priced in another currency than the billing one: what their providers bill,
    /// by currency, in that currency's micro-units (their `cost_micros` part is converted).
    pub native: Vec<(String, u64)>,
}

impl UsageRow {
    /// What the semantic cache saved net of what it spent verifying: its hits' cost less its
    /// verifications' (each verification counted as a call it failed to save).
    pub fn semantic_net_micros(&self) -> i64 {
        self.semantic_saved_micros - i64::try_from(self.verification_micros).unwrap_or(i64::MAX)
    }

    /// The provider prompt-cache hit rate: the share of prompt tokens the providers' caches
    /// served (`None` without prompt tokens).
    pub fn cached_share(&self) -> Option<f64> {
        (self.prompt_tokens > 0).then(|| self.cached_tokens as f64 / self.prompt_tokens as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_by_lists_parse_and_name_the_bad_column() {
        assert_eq!(
            GroupBy::parse_list("tenant, model,tenant").unwrap(),
            vec![GroupBy::Tenant, GroupBy::Model]
        );
        assert_eq!(GroupBy::parse_list("").unwrap(), vec![]);
        assert_eq!(
            GroupBy::parse_list("tenant,colour"),
            Err(QueryError::GroupBy("colour".into()))
        );
    }

    #[test]
    fn times_parse_as_dates_timestamps_or_millis() {
        assert_eq!(parse_time("from", "1970-01-02"), Ok(86_400_000));
        assert_eq!(parse_time("from", "1970-01-01T00:01:02Z"), Ok(62_000));
        assert_eq!(parse_time("from", "1234"), Ok(1234));
        for bad in [
            "2026-13-01",
            "yesterday",
            "2026-1-1",
            "2026-01-01T10:00",
            "2026-01-01T25:00:00Z",
        ] {
            assert!(
                matches!(
                    parse_time("to", bad),
                    Err(QueryError::Time { field: "to", .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_range_must_not_be_empty() {
        assert_eq!(
            UsageQuery::parse(None, Some("2026-02-01"), Some("2026-01-01"), None),
            Err(QueryError::EmptyRange)
        );
        let q = UsageQuery::parse(Some("acme"), Some("2026-01-01"), None, Some("day")).unwrap();
        assert_eq!(q.tenant.as_deref(), Some("acme"));
        assert_eq!(q.group_by, vec![GroupBy::Day]);
    }
}
