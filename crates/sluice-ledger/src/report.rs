//! Usage totals as people and programs read them: a text table, JSON or CSV, each with the
//! grouped columns first, then calls, tokens by kind, cost, what caching saved and what
//! hedges and retries cost. Money is shown in units with six decimals (exact micro-units).

use serde_json::{Map, Value, json};

use crate::query::{UsageQuery, UsageRow};

/// How a report is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Aligned columns for a terminal.
    Table,
    /// One JSON document.
    Json,
    /// Comma-separated values with a header line.
    Csv,
}

impl Format {
    /// `table`, `json` or `csv`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "table" => Some(Self::Table),
            "json" => Some(Self::Json),
            "csv" => Some(Self::Csv),
            _ => None,
        }
    }
}

/// Micro-units as units with six decimals (`-0.000040`, `12.500000`).
pub fn units(micros: i128) -> String {
    let sign = if micros < 0 { "-" } else { "" };
    let m = micros.unsigned_abs();
    format!("{sign}{}.{:06}", m / 1_000_000, m % 1_000_000)
}

/// The sum of `rows` (the report's last line).
pub fn total(rows: &[UsageRow]) -> UsageRow {
    let mut t = UsageRow::default();
    for r in rows {
        t.requests += r.requests;
        t.errors += r.errors;
        t.prompt_tokens += r.prompt_tokens;
        t.cached_tokens += r.cached_tokens;
        t.cache_write_tokens += r.cache_write_tokens;
        t.completion_tokens += r.completion_tokens;
        t.reasoning_tokens += r.reasoning_tokens;
        t.cost_micros += r.cost_micros;
        t.saved_micros += r.saved_micros;
        t.extra_micros += r.extra_micros;
        t.hedges += r.hedges;
        t.retries += r.retries;
        t.cache_hits += r.cache_hits;
        t.verifications += r.verifications;
        t.verification_micros += r.verification_micros;
        t.semantic_hits += r.semantic_hits;
        t.semantic_saved_micros += r.semantic_saved_micros;
        t.prompt_cache_saved_micros += r.prompt_cache_saved_micros;
        t.unpriced_calls += r.unpriced_calls;
        for (currency, micros) in &r.native {
            match t.native.iter_mut().find(|(c, _)| c == currency) {
                Some((_, sum)) => *sum += micros,
                None => t.native.push((currency.clone(), *micros)),
            }
        }
    }
    t.native.sort();
    t
}

/// What answers priced in other currencies cost in each (`CNY 10.800000`), or `-`.
fn native_text(r: &UsageRow) -> String {
    if r.native.is_empty() {
        return "-".into();
    }
    let parts: Vec<String> = r
        .native
        .iter()
        .map(|(c, m)| format!("{c} {}", units(i128::from(*m))))
        .collect();
    parts.join("; ")
}

/// The value columns, by header, read from a row.
fn values(r: &UsageRow) -> [(&'static str, String); 22] {
    [
        ("requests", r.requests.to_string()),
        ("errors", r.errors.to_string()),
        ("prompt_tokens", r.prompt_tokens.to_string()),
        ("cached_tokens", r.cached_tokens.to_string()),
        (
            "cached_share",
            r.cached_share().map_or("-".into(), |s| format!("{s:.3}")),
        ),
        ("cache_write_tokens", r.cache_write_tokens.to_string()),
        ("completion_tokens", r.completion_tokens.to_string()),
        ("reasoning_tokens", r.reasoning_tokens.to_string()),
        ("cost", units(i128::from(r.cost_micros))),
        ("native_cost", native_text(r)),
        ("cache_saved", units(i128::from(r.saved_micros))),
        (
            "prompt_cache_saved",
            units(i128::from(r.prompt_cache_saved_micros)),
        ),
        ("hedge_retry_cost", units(i128::from(r.extra_micros))),
        ("hedges", r.hedges.to_string()),
        ("retries", r.retries.to_string()),
        ("cache_hits", r.cache_hits.to_string()),
        ("verifications", r.verifications.to_string()),
        (
            "verification_cost",
            units(i128::from(r.verification_micros)),
        ),
        ("semantic_hits", r.semantic_hits.to_string()),
        ("semantic_saved", units(i128::from(r.semantic_saved_micros))),
        ("semantic_net", units(i128::from(r.semantic_net_micros()))),
        ("unpriced_calls", r.unpriced_calls.to_string()),
    ]
}

fn row_json(q: &UsageQuery, r: &UsageRow) -> Value {
    let mut m = Map::new();
    for (g, k) in q.group_by.iter().zip(&r.keys) {
        m.insert(g.name().into(), json!(k));
    }
    m.insert("requests".into(), json!(r.requests));
    m.insert("errors".into(), json!(r.errors));
    m.insert(
        "tokens".into(),
        json!({
            "prompt": r.prompt_tokens,
            "cached": r.cached_tokens,
            "cache_write": r.cache_write_tokens,
            "completion": r.completion_tokens,
            "reasoning": r.reasoning_tokens,
        }),
    );
    m.insert("cost_micros".into(), json!(r.cost_micros));
    let native: Map<String, Value> = r
        .native
        .iter()
        .map(|(c, micros)| (c.clone(), json!(micros)))
        .collect();
    m.insert("native_cost_micros".into(), Value::Object(native));
    m.insert("cache_saved_micros".into(), json!(r.saved_micros));
    m.insert("cached_share".into(), json!(r.cached_share()));
    m.insert(
        "prompt_cache_saved_micros".into(),
        json!(r.prompt_cache_saved_micros),
    );
    m.insert("hedge_retry_cost_micros".into(), json!(r.extra_micros));
    m.insert("hedges".into(), json!(r.hedges));
    m.insert("retries".into(), json!(r.retries));
    m.insert("cache_hits".into(), json!(r.cache_hits));
    m.insert("verifications".into(), json!(r.verifications));
    m.insert(
        "verification_cost_micros".into(),
        json!(r.verification_micros),
    );
    m.insert(
        "semantic".into(),
        json!({
            "hits": r.semantic_hits,
            "saved_micros": r.semantic_saved_micros,
            "verifications": r.verifications,
            "verification_cost_micros": r.verification_micros,
            "net_saved_micros": r.semantic_net_micros(),
        }),
    );
    m.insert("unpriced_calls".into(), json!(r.unpriced_calls));
    Value::Object(m)
}

/// The report as JSON: the question, one object per row, and the total.
pub fn json(q: &UsageQuery, rows: &[UsageRow]) -> Value {
    let by: Vec<&str> = q.group_by.iter().map(|g| g.name()).collect();
    json!({
        "tenant": q.tenant,
        "from_ms": q.from_ms,
        "to_ms": q.to_ms,
        "group_by": by,
        "rows": rows.iter().map(|r| row_json(q, r)).collect::<Vec<_>>(),
        "total": row_json(&UsageQuery::default(), &total(rows)),
    })
}

fn cells(q: &UsageQuery, r: &UsageRow, label_total: bool) -> Vec<String> {
    let mut out: Vec<String> = if label_total {
        q.group_by
            .iter()
            .enumerate()
            .map(|(i, _)| {
                if i == 0 {
                    "TOTAL".into()
                } else {
                    String::new()
                }
            })
            .collect()
    } else {
        r.keys
            .iter()
            .map(|k| k.clone().unwrap_or_else(|| "-".into()))
            .collect()
    };
    out.extend(values(r).into_iter().map(|(_, v)| v));
    out
}

fn headers(q: &UsageQuery) -> Vec<String> {
    let mut h: Vec<String> = q.group_by.iter().map(|g| g.name().to_string()).collect();
    h.extend(
        values(&UsageRow::default())
            .into_iter()
            .map(|(n, _)| n.to_string()),
    );
    h
}

/// The report as CSV (RFC 4180 quoting), without a total line.
pub fn csv(q: &UsageQuery, rows: &[UsageRow]) -> String {
    let quote = |s: &str| {
        if s.contains([',', '"', '\n', '\r']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    };
    let line =
        |cells: Vec<String>| cells.iter().map(|c| quote(c)).collect::<Vec<_>>().join(",") + "\r\n";
    let mut out = line(headers(q));
    for r in rows {
        out.push_str(&line(cells(q, r, false)));
    }
    out
}

/// The report as an aligned text table with a total line.
pub fn table(q: &UsageQuery, rows: &[UsageRow]) -> String {
    let mut lines = vec![headers(q)];
    lines.extend(rows.iter().map(|r| cells(q, r, false)));
    if !q.group_by.is_empty() {
        lines.push(cells(q, &total(rows), true));
    }
    let widths: Vec<usize> = (0..lines[0].len())
        .map(|c| {
            lines
                .iter()
                .map(|l| l[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let keys = q.group_by.len();
    let mut out = String::new();
    for l in &lines {
        let padded: Vec<String> = l
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (cell, w))| {
                if i < keys {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        out.push_str(padded.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GroupBy;

    fn rows() -> (UsageQuery, Vec<UsageRow>) {
        let q = UsageQuery {
            group_by: vec![GroupBy::Tenant],
            ..UsageQuery::default()
        };
        let a = UsageRow {
            keys: vec![Some("acme, inc".into())],
            requests: 3,
            cost_micros: 1_500_000,
            saved_micros: -40,
            ..UsageRow::default()
        };
        let b = UsageRow {
            keys: vec![None],
            requests: 1,
            cost_micros: 250,
            extra_micros: 100,
            ..UsageRow::default()
        };
        (q, vec![a, b])
    }

    #[test]
    fn money_is_exact_units() {
        assert_eq!(units(1_500_000), "1.500000");
        assert_eq!(units(-40), "-0.000040");
        assert_eq!(units(0), "0.000000");
    }

    #[test]
    fn csv_quotes_what_needs_it() {
        let (q, r) = rows();
        let text = csv(&q, &r);
        let lines: Vec<&str> = text.split("\r\n").collect();
        assert!(lines[0].starts_with("tenant,requests,errors,prompt_tokens"));
        assert!(lines[1].starts_with("\"acme, inc\",3,0,"), "{}", lines[1]);
        assert!(lines[1].contains(",1.500000,-,-0.000040,0.000000,"));
        assert!(lines[2].starts_with("-,1,"));
    }

    #[test]
    fn tables_align_and_total() {
        let (q, r) = rows();
        let text = table(&q, &r);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[3].starts_with("TOTAL"));
        assert!(lines[3].contains("1.500250"), "{text}");
        // Right-aligned numbers end in the same column.
        let end = |l: &str| l.find("requests").map(|i| i + "requests".len());
        let req_end = end(lines[0]).unwrap();
        assert_eq!(&lines[1][req_end - 1..req_end], "3");
    }

    #[test]
    fn json_names_the_grouped_columns_and_totals() {
        let (q, r) = rows();
        let v = json(&q, &r);
        assert_eq!(v["rows"][0]["tenant"], "acme, inc");
        assert_eq!(v["rows"][1]["tenant"], Value::Null);
        assert_eq!(v["total"]["requests"], 4);
        assert_eq!(v["total"]["hedge_retry_cost_micros"], 100);
        assert_eq!(v["group_by"], json!(["tenant"]));
    }
}
