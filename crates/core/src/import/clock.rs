//! The time stamps of access logs as seconds since the Unix epoch: the
//! common log format's `10/Oct/2000:13:55:36 -0700` and RFC 3339 /
//! ISO 8601 (`2000-10-10T20:55:36.5Z`, `…+02:00`).

/// Days from 1970-01-01 to the civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn epoch(y: i64, mo: u32, d: u32, h: u32, mi: u32, s: f64, offset_s: i64) -> Option<f64> {
    let valid = (1..=12).contains(&mo)
        && (1..=31).contains(&d)
        && h < 24
        && mi < 60
        && (0.0..61.0).contains(&s)
        && (1970..=9999).contains(&y);
    valid.then(|| {
        (days_from_civil(y, mo, d) * 86_400 + i64::from(h * 3600 + mi * 60) - offset_s) as f64 + s
    })
}

/// `10/Oct/2000:13:55:36 -0700` (the offset may be missing: UTC).
pub(crate) fn parse_clf_time(s: &str) -> Option<f64> {
    let (stamp, zone) = match s.trim().split_once(' ') {
        Some((a, z)) => (a, Some(z.trim())),
        None => (s.trim(), None),
    };
    let mut it = stamp.splitn(4, [':', '/']);
    let (d, mon, y) = (it.next()?, it.next()?, it.next()?);
    let time = it.next()?;
    let mo = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| m.eq_ignore_ascii_case(mon))? as u32
        + 1;
    let mut hms = time.splitn(3, ':');
    let (h, mi, sec) = (hms.next()?, hms.next()?, hms.next()?);
    let offset = match zone {
        Some(z) => offset_seconds(z)?,
        None => 0,
    };
    epoch(
        y.parse().ok()?,
        mo,
        d.parse().ok()?,
        h.parse().ok()?,
        mi.parse().ok()?,
        sec.parse().ok()?,
        offset,
    )
}

/// `+0200`, `-07:00`, `Z`.
fn offset_seconds(z: &str) -> Option<i64> {
    if z.eq_ignore_ascii_case("z") {
        return Some(0);
    }
    let sign = match z.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let digits: String = z[1..].chars().filter(|c| *c != ':').collect();
    if digits.len() != 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let h: i64 = digits[..2].parse().ok()?;
    let m: i64 = digits[2..].parse().ok()?;
    Some(sign * (h * 3600 + m * 60))
}

/// `2000-10-10T20:55:36.5Z`, with `T` or a space, a fraction, and `Z` or
/// an offset (none: UTC).
pub(crate) fn parse_rfc3339(s: &str) -> Option<f64> {
    let s = s.trim();
    if s.len() < 19 || !s.is_char_boundary(10) || !s.is_char_boundary(19) {
        return None;
    }
    let (date, rest) = s.split_at(10);
    let sep = rest.as_bytes()[0];
    if sep != b'T' && sep != b't' && sep != b' ' {
        return None;
    }
    let mut d = date.splitn(3, '-');
    let (y, mo, day) = (d.next()?, d.next()?, d.next()?);
    let clock = &rest[1..9];
    let mut c = clock.splitn(3, ':');
    let (h, mi, sec) = (c.next()?, c.next()?, c.next()?);
    let tail = &rest[9..];
    let zone_at = tail.find(['Z', 'z', '+', '-']).unwrap_or(tail.len());
    let fraction = &tail[..zone_at];
    let frac = if fraction.is_empty() {
        0.0
    } else {
        let digits = fraction.strip_prefix(['.', ','])?;
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        format!("0.{digits}").parse::<f64>().ok()?
    };
    let offset = if zone_at == tail.len() {
        0
    } else {
        offset_seconds(&tail[zone_at..])?
    };
    let sec: u32 = sec.parse().ok()?;
    epoch(
        y.parse().ok()?,
        mo.parse().ok()?,
        day.parse().ok()?,
        h.parse().ok()?,
        mi.parse().ok()?,
        f64::from(sec) + frac,
        offset,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_notations_agree() {
        let t = 971_211_336.0; // 2000-10-10T20:55:36Z
        assert_eq!(parse_clf_time("10/Oct/2000:13:55:36 -0700"), Some(t));
        assert_eq!(parse_clf_time("10/Oct/2000:20:55:36"), Some(t));
        assert_eq!(parse_rfc3339("2000-10-10T20:55:36Z"), Some(t));
        assert_eq!(parse_rfc3339("2000-10-10T22:55:36+02:00"), Some(t));
        assert_eq!(parse_rfc3339("2000-10-10 20:55:36.25"), Some(t + 0.25));
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(parse_rfc3339("2024-02-29T00:00:00Z"), Some(1_709_164_800.0));
        for bad in [
            "2000-13-10T20:55:36Z",
            "2000-10-10X20:55:36",
            "2000-10-10T20:55:36.Z",
            "é",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
        assert_eq!(parse_clf_time("10/Foo/2000:13:55:36 -0700"), None);
        assert_eq!(parse_clf_time("10/Oct/2000:13:55:36 +07"), None);
    }
}
