//! The two text formats `/metrics` speaks: Prometheus text 0.0.4 by default (the contract)
//! and OpenMetrics 1.0.0 to a scraper whose `Accept` prefers it.
//!
//! prometheus-client encodes OpenMetrics only; [`to_prometheus`] rewrites its output into the
//! Prometheus format: a counter family is named after its samples (`x_total`, where
//! OpenMetrics names the family `x`), `unknown` is `untyped`, and the lines Prometheus text
//! does not have go (`# UNIT`, `# EOF`, counters' `_created` samples, exemplars).

use std::collections::HashMap;

/// A text format of the metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exposition {
    /// Prometheus text, version 0.0.4.
    Prometheus,
    /// OpenMetrics text, version 1.0.0.
    OpenMetrics,
}

const OPENMETRICS: &str = "application/openmetrics-text";

impl Exposition {
    /// The `Content-Type` of an answer in this format.
    #[must_use]
    pub fn content_type(self) -> &'static str {
        match self {
            Exposition::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Exposition::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }

    /// The format an `Accept` header asks for: OpenMetrics when it names
    /// `application/openmetrics-text` (version 1.0.0, or no version) with a weight above zero
    /// and at least that of anything Prometheus text would satisfy; else Prometheus text.
    #[must_use]
    pub fn negotiate(accept: Option<&str>) -> Exposition {
        let Some(accept) = accept else { return Exposition::Prometheus };
        let (mut openmetrics, mut text) = (0.0f32, 0.0f32);
        for range in accept.split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or_default().to_ascii_lowercase();
            let (mut q, mut version) = (1.0f32, None);
            for param in parts {
                let Some((name, value)) = param.split_once('=') else { continue };
                match name.trim().to_ascii_lowercase().as_str() {
                    "q" => q = value.trim().parse().unwrap_or(0.0),
                    "version" => version = Some(value.trim().trim_matches('"').to_owned()),
                    _ => {}
                }
            }
            let q = q.clamp(0.0, 1.0);
            match media.as_str() {
                OPENMETRICS if version.as_deref().is_none_or(|v| v == "1.0.0") => openmetrics = openmetrics.max(q),
                "text/plain" if version.as_deref().is_none_or(|v| v == "0.0.4") => text = text.max(q),
                "text/*" | "*/*" => text = text.max(q),
                _ => {}
            }
        }
        if openmetrics > 0.0 && openmetrics >= text { Exposition::OpenMetrics } else { Exposition::Prometheus }
    }
}

/// The Prometheus 0.0.4 text of prometheus-client's OpenMetrics text.
#[must_use]
pub fn to_prometheus(openmetrics: &str) -> String {
    let types: HashMap<&str, &str> =
        openmetrics.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.split_once(' ')).collect();
    // The family name Prometheus text gives a family OpenMetrics calls `name`.
    let renamed = |name: &str| match types.get(name).copied() {
        Some("counter") => format!("{name}_total"),
        Some("info") => format!("{name}_info"),
        _ => name.to_owned(),
    };
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some((name, help)) = line.strip_prefix("# HELP ").and_then(|r| r.split_once(' ')) {
            out.push_str(&format!("# HELP {} {help}\n", renamed(name)));
            continue;
        }
        if let Some((name, kind)) = line.strip_prefix("# TYPE ").and_then(|r| r.split_once(' ')) {
            let kind = match kind {
                "unknown" => "untyped",
                "info" => "gauge",
                other => other,
            };
            out.push_str(&format!("# TYPE {} {kind}\n", renamed(name)));
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let sample_name = line.split(['{', ' ']).next().unwrap_or_default();
        let created = sample_name
            .strip_suffix("_created")
            .is_some_and(|family| matches!(types.get(family).copied(), Some("counter" | "histogram")));
        if created {
            continue;
        }
        // An exemplar follows the value as ` # {labels} value`: Prometheus text has none.
        let sample = line.split_once(" # ").map_or(line, |(sample, _)| sample);
        out.push_str(sample);
        out.push('\n');
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Checks `text` is Prometheus 0.0.4 exposition, strictly: every sample belongs to the
    /// family its `# TYPE` line (which comes first, once) declares, named as Prometheus names
    /// it; families are contiguous; labels and values parse; no OpenMetrics-only line.
    /// Returns the samples as `(name{labels}, value)`.
    pub(crate) fn parse_prometheus(text: &str) -> Result<Vec<(String, f64)>, String> {
        let mut typed: HashMap<String, String> = HashMap::new();
        let mut helped: std::collections::HashSet<String> = std::collections::HashSet::new();
        let mut closed: std::collections::HashSet<String> = std::collections::HashSet::new();
        let mut current: Option<(String, String)> = None;
        let mut samples = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let at = |m: &str| format!("line {}: {m}: {line:?}", i + 1);
            if line.is_empty() {
                continue;
            }
            if line == "# EOF" || line.starts_with("# UNIT") {
                return Err(at("an OpenMetrics-only line"));
            }
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, _) = rest.split_once(' ').ok_or_else(|| at("HELP without text"))?;
                check_name(name).map_err(|e| at(&e))?;
                if !helped.insert(name.to_owned()) {
                    return Err(at("a second HELP"));
                }
                continue;
            }
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').ok_or_else(|| at("TYPE without a type"))?;
                check_name(name).map_err(|e| at(&e))?;
                if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind) {
                    return Err(at("not a Prometheus type"));
                }
                if typed.insert(name.to_owned(), kind.to_owned()).is_some() {
                    return Err(at("a second TYPE"));
                }
                if let Some((previous, _)) = current.replace((name.to_owned(), kind.to_owned())) {
                    closed.insert(previous);
                }
                continue;
            }
            if line.starts_with('#') {
                continue;
            }
            let (name, labels, value) = split_sample(line).map_err(|e| at(&e))?;
            let (family, kind) = current.as_ref().ok_or_else(|| at("a sample before any TYPE"))?;
            let belongs = match kind.as_str() {
                "histogram" => [format!("{family}_bucket"), format!("{family}_sum"), format!("{family}_count")]
                    .contains(&name.to_owned()),
                "summary" => name == family || name == format!("{family}_sum") || name == format!("{family}_count"),
                _ => name == family,
            };
            if !belongs || closed.contains(family) {
                return Err(at(&format!("a sample outside its family {family} ({kind})")));
            }
            if name.ends_with("_bucket") && !labels.contains("le=\"") {
                return Err(at("a bucket without le"));
            }
            samples.push((format!("{name}{labels}"), value));
        }
        Ok(samples)
    }

    fn check_name(name: &str) -> Result<(), String> {
        let mut chars = name.chars();
        let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':');
        if first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            Ok(())
        } else {
            Err(format!("bad metric name {name:?}"))
        }
    }

    /// `name{labels} value`: the name, the label set as written (checked), the value.
    fn split_sample(line: &str) -> Result<(&str, &str, f64), String> {
        let name_end = line.find(['{', ' ']).ok_or("a sample without a value")?;
        let name = &line[..name_end];
        check_name(name)?;
        let (labels, rest) = if line[name_end..].starts_with('{') {
            let close = labels_end(&line[name_end..]).ok_or("unclosed labels")?;
            (&line[name_end..name_end + close + 1], &line[name_end + close + 1..])
        } else {
            ("", &line[name_end..])
        };
        let mut fields = rest.split(' ').filter(|f| !f.is_empty());
        let value = fields.next().ok_or("no value")?;
        let value = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            "NaN" => f64::NAN,
            v => v.parse::<f64>().map_err(|_| format!("bad value {v:?}"))?,
        };
        if let Some(ts) = fields.next() {
            ts.parse::<i64>().map_err(|_| format!("bad timestamp {ts:?}"))?;
        }
        if fields.next().is_some() {
            return Err("text after the timestamp".into());
        }
        Ok((name, labels, value))
    }

    /// The index of the `}` closing a label set `{a="x",b="y"}`, with escapes in values.
    fn labels_end(s: &str) -> Option<usize> {
        let bytes = s.as_bytes();
        let mut i = 1;
        loop {
            if bytes.get(i) == Some(&b'}') {
                return Some(i);
            }
            let eq = s[i..].find('=')? + i;
            check_name(&s[i..eq]).ok()?;
            if bytes.get(eq + 1) != Some(&b'"') {
                return None;
            }
            i = eq + 2;
            loop {
                match bytes.get(i)? {
                    b'\\' => i += 2,
                    b'"' => break,
                    _ => i += 1,
                }
            }
            i += 1;
            match bytes.get(i)? {
                b',' => i += 1,
                b'}' => return Some(i),
                _ => return None,
            }
        }
    }

    #[test]
    fn prometheus_scrapers_get_text_unless_they_prefer_openmetrics() {
        use Exposition::{OpenMetrics, Prometheus};
        let cases = [
            (None, Prometheus),
            (Some("*/*"), Prometheus),
            (Some("text/plain"), Prometheus),
            (Some("text/plain;version=0.0.4;q=0.9,*/*;q=0.1"), Prometheus),
            (Some("application/openmetrics-text"), OpenMetrics),
            (Some("application/openmetrics-text; version=1.0.0; charset=utf-8"), OpenMetrics),
            // What Prometheus itself sends.
            (
                Some(
                    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,\
                     text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
                ),
                OpenMetrics,
            ),
            (Some("text/plain;q=1,application/openmetrics-text;q=0.5"), Prometheus),
            (Some("application/openmetrics-text;q=0"), Prometheus),
            (Some("application/openmetrics-text;version=0.0.1"), Prometheus),
            (Some("APPLICATION/OpenMetrics-Text"), OpenMetrics),
        ];
        for (accept, want) in cases {
            assert_eq!(Exposition::negotiate(accept), want, "{accept:?}");
        }
    }

    #[test]
    fn openmetrics_becomes_prometheus_text_that_parses() {
        let om = "# HELP x_requests Requests.\n# TYPE x_requests counter\n\
                  x_requests_total{route=\"/a\",status=\"200\"} 3\n\
                  x_requests_created{route=\"/a\",status=\"200\"} 1.7e9\n\
                  # HELP x_wait_seconds Wait.\n# TYPE x_wait_seconds counter\n# UNIT x_wait_seconds seconds\n\
                  x_wait_seconds_total 1.5 # {trace=\"a\"} 1.0\n\
                  # HELP x_level Level.\n# TYPE x_level gauge\nx_level{node=\"1\"} -2\n\
                  # HELP x_odd Odd.\n# TYPE x_odd unknown\nx_odd 1\n\
                  # HELP x_lat Latency.\n# TYPE x_lat histogram\n\
                  x_lat_sum 0.5\nx_lat_count 2\nx_lat_bucket{le=\"0.1\"} 1\nx_lat_bucket{le=\"+Inf\"} 2\n# EOF\n";
        assert!(parse_prometheus(om).is_err(), "OpenMetrics is not Prometheus text");
        let text = to_prometheus(om);
        let samples = parse_prometheus(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert!(text.contains("# TYPE x_requests_total counter\n"), "{text}");
        assert!(text.contains("# TYPE x_odd untyped\n"), "{text}");
        assert!(!text.contains("_created") && !text.contains("# {"), "{text}");
        assert_eq!(samples.len(), 8, "{samples:?}");
        assert!(samples.contains(&("x_wait_seconds_total".to_owned(), 1.5)));
    }

    #[test]
    fn the_strict_parser_refuses_what_prometheus_would() {
        for bad in [
            "x 1\n",
            "# TYPE x counter\nx_total 1\n",
            "# TYPE x gauge\nx{a=\"1\" 1\n",
            "# TYPE x gauge\nx one\n",
            "# TYPE x gauge\n# TYPE x gauge\n",
            "# TYPE x gauge\nx 1\n# TYPE y gauge\ny 1\nx 2\n",
            "# TYPE x stateset\n",
        ] {
            assert!(parse_prometheus(bad).is_err(), "{bad:?} is refused");
        }
    }
}
