//! Rates of arrivals: `500/s`, `30000/min`, `2/ms`, or a plain number per
//! second — shared by the scenario's `arrivals:` and `autoperf run --rate`.

/// Arrivals per second from `text`; positive and finite.
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
