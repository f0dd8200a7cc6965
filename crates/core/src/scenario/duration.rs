//! Durations as users write them: `500ms`, `30s`, `1.5s`, `2m`, `1h`, and
//! sums such as `1m30s`. A bare `0` is allowed (zero needs no unit); any
//! other number without a unit is refused because it is ambiguous.

use std::time::Duration;

/// Parses a duration; the error says what was expected and what was found.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    let fail = || format!("expected a duration like `500ms`, `30s` or `2m`, found `{text}`");
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(fail());
    }
    let mut rest = s;
    let mut total = 0.0f64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_len);
        if number.is_empty() || number.starts_with('.') || number.ends_with('.') {
            return Err(fail());
        }
        let value: f64 = number.parse().map_err(|_| fail())?;
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let seconds = match unit {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" | "min" => 60.0,
            "h" => 3600.0,
            "" => {
                return Err(format!(
                    "expected a duration with a unit (`{number}s` or `{number}ms`), found `{text}`"
                ))
            }
            _ => return Err(fail()),
        };
        total += value * seconds;
        rest = next;
    }
    Duration::try_from_secs_f64(total).map_err(|_| fail())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        let ok = [
            ("500ms", Duration::from_millis(500)),
            ("30s", Duration::from_secs(30)),
            ("2m", Duration::from_secs(120)),
            ("1.5s", Duration::from_millis(1500)),
            ("1h", Duration::from_secs(3600)),
            ("1m30s", Duration::from_secs(90)),
            ("250us", Duration::from_micros(250)),
            ("0", Duration::ZERO),
            ("0s", Duration::ZERO),
            (" 10s ", Duration::from_secs(10)),
        ];
        for (text, want) in ok {
            assert_eq!(parse_duration(text), Ok(want), "{text}");
        }
        for bad in [
            "", "fast", "10", "1.5", "-1s", "1x", "s", ".5s", "5.s", "1e3s",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad} should fail");
        }
        assert_eq!(
            parse_duration("fast").unwrap_err(),
            "expected a duration like `500ms`, `30s` or `2m`, found `fast`"
        );
        assert!(parse_duration("10").unwrap_err().contains("`10s`"));
    }
}
