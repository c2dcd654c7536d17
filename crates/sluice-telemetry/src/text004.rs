//! The Prometheus text format 0.0.4, written from the OpenMetrics page the registry encodes:
//! for a scraper that asks for `text/plain` (or for nothing in particular). The samples are
//! the same; the metadata differs: a counter's family is named with its `_total`, there are
//! no `# UNIT` lines and no `# EOF`, exemplars are left out, and help text escapes only the
//! backslash and the line feed.

/// `open_metrics` (as the registry writes it) in the 0.0.4 text format.
pub fn from_openmetrics(open_metrics: &str) -> String {
    let mut out = String::with_capacity(open_metrics.len());
    let mut help: Option<(&str, &str)> = None;
    for line in open_metrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, text) = rest.split_once(' ').unwrap_or((rest, ""));
            help = Some((name, text));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (family, kind) = match kind {
                "counter" => (format!("{name}_total"), "counter"),
                "info" => (format!("{name}_info"), "gauge"),
                "gauge" | "histogram" | "summary" => (name.to_string(), kind),
                _ => (name.to_string(), "untyped"),
            };
            if let Some((h, text)) = help.take()
                && h == name
            {
                out.push_str("# HELP ");
                out.push_str(&family);
                out.push(' ');
                out.push_str(&text.replace("\\\"", "\""));
                out.push('\n');
            }
            out.push_str("# TYPE ");
            out.push_str(&family);
            out.push(' ');
            out.push_str(kind);
            out.push('\n');
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            // `# UNIT`, `# EOF` and any other comment: not in 0.0.4.
            continue;
        }
        // A sample; an exemplar follows ` # ` after the value.
        let sample = match exemplar_start(line) {
            Some(i) => &line[..i],
            None => line,
        };
        out.push_str(sample);
        out.push('\n');
    }
    out
}

/// Where a sample line's exemplar (` # {...}`) starts, outside its label values.
fn exemplar_start(line: &str) -> Option<usize> {
    let mut quoted = false;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '#' if !quoted && line[..i].ends_with(' ') => return Some(i - 1),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_named_with_total_and_open_metrics_only_lines_go() {
        let om = "# HELP sluice_requests Requests by \\\"status\\\"\n# TYPE sluice_requests counter\nsluice_requests_total{code=\"a # b\"} 3 # {trace_id=\"x\"} 1.0\n# HELP sluice_up Up\n# TYPE sluice_up gauge\n# UNIT sluice_up seconds\nsluice_up 1\n# HELP sluice_build Build\n# TYPE sluice_build info\nsluice_build_info{v=\"1\"} 1\n# EOF\n";
        let text = from_openmetrics(om);
        assert_eq!(
            text,
            "# HELP sluice_requests_total Requests by \"status\"\n# TYPE sluice_requests_total counter\nsluice_requests_total{code=\"a # b\"} 3\n# HELP sluice_up Up\n# TYPE sluice_up gauge\nsluice_up 1\n# HELP sluice_build_info Build\n# TYPE sluice_build_info gauge\nsluice_build_info{v=\"1\"} 1\n"
        );
    }
}
