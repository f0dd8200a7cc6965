//! Rates of arrivals: `500/s`, `30000/min`, `2/ms`, or a plain number per
//! second — shared by the scenario's `arrivals:` and `autoperf run --rate`.

/// The highest rate a run accepts: above what autoperf's generator starts
/// on one machine (some hundred thousand requests or a few million Kafka
/// records a second), so a typo such as `1e9/s` is an error, not a run that
/// spins both cores.
pub(crate) const MAX_RATE_PER_SECOND: f64 = 10_000_000.0;

/// Arrivals per second from `text`; positive, finite, at most
/// `MAX_RATE_PER_SECOND`.
pub fn parse_per_second(text: &str) -> Result<f64, String> {
    let text = text.trim();
    let (number, unit) = match text.split_once('/') {
        Some((n, unit)) => (n.trim(), unit.trim()),
        None => (text, "s"),
    };
    let per_second = match unit {
        "s" | "sec" => 1.0,
        "ms" => 1000.0,
        "m" | "min" => 1.0 / 60.0,
        "h" => 1.0 / 3600.0,
        other => {
            return Err(format!(
                "unknown rate unit `/{other}`: write e.g. `500/s` or `30000/min`"
            ))
        }
    };
    match number.parse::<f64>() {
        Ok(n) if n > 0.0 && n.is_finite() && n * per_second > MAX_RATE_PER_SECOND => Err(format!(
            "`{text}` is more than one machine can start: the limit is {}/s (spread a \
             higher rate over several generator hosts)",
            MAX_RATE_PER_SECOND as u64
        )),
        Ok(n) if n > 0.0 && n.is_finite() => Ok(n * per_second),
        _ => Err(format!(
            "expected a positive rate like `500/s`, found `{text}`"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_above_one_machine_are_refused_with_the_limit() {
        for text in ["1e9/s", "1e30/s", "20000/ms", "10000001"] {
            let e = parse_per_second(text).unwrap_err();
            assert!(e.contains("10000000/s"), "{text}: {e}");
        }
        assert_eq!(parse_per_second("10000/ms"), Ok(MAX_RATE_PER_SECOND));
    }

    #[test]
    fn rates_table() {
        for (text, want) in [
            ("500/s", 500.0),
            ("500", 500.0),
            (" 30000/min ", 500.0),
            ("2/ms", 2000.0),
            ("3600/h", 1.0),
            ("0.5/s", 0.5),
        ] {
            assert_eq!(parse_per_second(text), Ok(want), "{text}");
        }
        for bad in ["0/s", "-1/s", "fast", "10/week", "/s", "inf"] {
            assert!(parse_per_second(bad).is_err(), "{bad}");
        }
    }
}
