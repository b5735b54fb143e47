//! Times as operators read and type them: RFC 3339 in UTC, and `--since` values.
//!
//! An event's `at` is unix milliseconds, a `u64`: every value before 1970 is out of reach, and
//! [`LATEST`] (the last millisecond of the year 9999) bounds the other end. Import refuses a
//! later time; one already stored is shown as invalid, with its number.

use stepjournal_codec::UnixMillis;

const MS_PER_DAY: u64 = 86_400_000;

/// The latest time taken in or shown as a date: 9999-12-31T23:59:59.999Z.
pub const LATEST: UnixMillis = UnixMillis(253_402_300_799_999);

/// Whether `at` is a time this build shows as a date (1970 to the end of 9999).
pub fn in_range(at: UnixMillis) -> bool {
    at <= LATEST
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// (year, month, day) to days since 1970-01-01, proleptic Gregorian.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The time in RFC 3339, UTC, with milliseconds (`2025-01-15T09:00:00.000Z`); a time after
/// [`LATEST`] reads `invalid time (N ms)`.
pub fn rfc3339(at: UnixMillis) -> String {
    checked_rfc3339(at).unwrap_or_else(|| format!("invalid time ({} ms)", at.get()))
}

/// The time in RFC 3339, or `None` after [`LATEST`].
pub fn checked_rfc3339(at: UnixMillis) -> Option<String> {
    in_range(at).then(|| format_rfc3339(at))
}

fn format_rfc3339(at: UnixMillis) -> String {
    let ms = at.get();
    let days = (ms / MS_PER_DAY) as i64;
    let (year, month, day) = civil_from_days(days);
    let rest = ms % MS_PER_DAY;
    let (h, m, s, milli) = (rest / 3_600_000, rest / 60_000 % 60, rest / 1000 % 60, rest % 1000);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{milli:03}Z")
}

fn number(text: &str, what: &str) -> Result<u32, String> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("the {what} `{text}` is not a number"));
    }
    text.parse().map_err(|_| format!("the {what} `{text}` is too large"))
}

fn within(value: u32, low: u32, high: u32, what: &str) -> Result<u32, String> {
    if value < low || value > high {
        return Err(format!("the {what} {value} is not between {low} and {high}"));
    }
    Ok(value)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Parses `YYYY-MM-DD` into days since the epoch.
fn date(text: &str) -> Result<i64, String> {
    let mut parts = text.split('-');
    let (Some(y), Some(m), Some(d), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(format!("`{text}` is not a date YYYY-MM-DD"));
    };
    if y.len() != 4 {
        return Err(format!("`{text}` is not a date YYYY-MM-DD"));
    }
    let year = i64::from(number(y, "year")?);
    let month = within(number(m, "month")?, 1, 12, "month")?;
    let day = within(number(d, "day")?, 1, days_in_month(year, month), "day")?;
    if year < 1970 {
        return Err(format!("the year {year} is before 1970"));
    }
    Ok(days_from_civil(year, month, day))
}

/// Parses `HH:MM[:SS[.fff]]` into milliseconds since midnight.
fn clock(text: &str) -> Result<u64, String> {
    let (hms, frac) = match text.split_once('.') {
        Some((hms, frac)) => (hms, Some(frac)),
        None => (text, None),
    };
    let mut parts = hms.split(':');
    let h = within(number(parts.next().unwrap_or(""), "hour")?, 0, 23, "hour")?;
    let m = within(number(parts.next().unwrap_or(""), "minute")?, 0, 59, "minute")?;
    let s = match parts.next() {
        Some(s) => within(number(s, "second")?, 0, 60, "second")?,
        None => 0,
    };
    if parts.next().is_some() {
        return Err(format!("`{text}` is not a time HH:MM:SS"));
    }
    let milli = match frac {
        None => 0,
        Some(f) => {
            let digits: String = f.chars().take(3).collect();
            let scaled = format!("{digits:0<3}");
            number(f, "fraction of a second")?;
            u64::from(number(&scaled, "fraction of a second")?)
        }
    };
    Ok(u64::from(h) * 3_600_000 + u64::from(m) * 60_000 + u64::from(s) * 1000 + milli)
}

/// Parses a `--since` value (the error names the value and what it may be):
/// - a duration before `now`: a number and a unit, `s`, `m`, `h` or `d` (`90s`, `15m`, `2h`, `7d`);
/// - a date, `2025-01-15` (midnight UTC);
/// - an RFC 3339 time, `2025-01-15T09:00:00Z`, `2025-01-15T09:00:00.250+02:00` (a space may
///   stand for the `T`; seconds and fraction are optional).
pub fn parse_since(text: &str, now: UnixMillis) -> Result<UnixMillis, String> {
    let text = text.trim();
    since(text, now).map_err(|reason| {
        format!(
            "`{text}` is not a duration (90s, 15m, 2h, 7d), a date (2025-01-15) or an RFC 3339 \
             time (2025-01-15T09:00:00Z): {reason}"
        )
    })
}

fn since(text: &str, now: UnixMillis) -> Result<UnixMillis, String> {
    if let Some(count) = text.strip_suffix(['s', 'm', 'h', 'd'])
        && !count.is_empty()
        && count.bytes().all(|b| b.is_ascii_digit())
    {
        let n = u64::from(number(count, "duration")?);
        let unit = match text.as_bytes().last() {
            Some(b's') => 1000,
            Some(b'm') => 60_000,
            Some(b'h') => 3_600_000,
            _ => MS_PER_DAY,
        };
        return Ok(UnixMillis(now.get().saturating_sub(n.saturating_mul(unit))));
    }
    // `YYYY-MM-DD`, then `T` (or `t`, or a space) and the time.
    let (day, time) = match (text.get(..10), text.get(10..11), text.get(11..)) {
        (Some(day), Some("T" | "t" | " "), Some(time)) => (day, Some(time)),
        _ => (text, None),
    };
    let days = date(day)?;
    let base = days as u64 * MS_PER_DAY;
    let Some(time) = time else {
        return Ok(UnixMillis(base));
    };
    let (clock_text, offset_ms) = if let Some(c) = time.strip_suffix(['Z', 'z']) {
        (c, 0i64)
    } else if let Some(i) = time.rfind(['+', '-']) {
        let (c, off) = time.split_at(i);
        let sign = if off.starts_with('-') { -1 } else { 1 };
        let (oh, om) = off
            .get(1..)
            .and_then(|o| o.split_once(':'))
            .ok_or_else(|| format!("the offset `{off}` is not ±HH:MM"))?;
        let oh = within(number(oh, "offset hour")?, 0, 23, "offset hour")?;
        let om = within(number(om, "offset minute")?, 0, 59, "offset minute")?;
        (c, sign * (i64::from(oh) * 3_600_000 + i64::from(om) * 60_000))
    } else {
        return Err(
            "the time has no zone: end it with `Z` (UTC) or an offset such as `+02:00`".to_owned()
        );
    };
    let local = base + clock(clock_text)?;
    let utc = local as i64 - offset_ms;
    u64::try_from(utc).map(UnixMillis).map_err(|_| "it is before 1970".to_owned())
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn times_print_as_rfc3339_utc_with_milliseconds() {
        assert_eq!(rfc3339(UnixMillis(0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(UnixMillis(1_736_931_600_250)), "2025-01-15T09:00:00.250Z");
        assert_eq!(rfc3339(UnixMillis(951_782_400_000)), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339(UnixMillis(4_102_444_799_999)), "2099-12-31T23:59:59.999Z");
    }

    #[test]
    fn a_time_after_the_year_9999_is_shown_as_invalid() {
        // Defect: `at` = u64::MAX was shown as the year 584556019.
        assert_eq!(rfc3339(LATEST), "9999-12-31T23:59:59.999Z");
        assert_eq!(rfc3339(UnixMillis(LATEST.get() + 1)), "invalid time (253402300800000 ms)");
        assert_eq!(rfc3339(UnixMillis(u64::MAX)), "invalid time (18446744073709551615 ms)");
        assert_eq!(checked_rfc3339(UnixMillis(u64::MAX)), None);
    }

    #[test]
    fn every_printed_day_parses_back() {
        for days in (0..80_000).step_by(37) {
            let ms = days * MS_PER_DAY + 45_296_789;
            let text = rfc3339(UnixMillis(ms));
            assert_eq!(parse_since(&text, UnixMillis(0)), Ok(UnixMillis(ms)), "{text}");
        }
    }

    #[test]
    fn since_takes_durations_dates_and_zoned_times() {
        let now = UnixMillis(1_736_931_600_000);
        assert_eq!(parse_since("90s", now), Ok(UnixMillis(now.get() - 90_000)));
        assert_eq!(parse_since("2h", now), Ok(UnixMillis(now.get() - 7_200_000)));
        assert_eq!(parse_since("1d", now), Ok(UnixMillis(now.get() - MS_PER_DAY)));
        assert_eq!(parse_since("2025-01-15", now), Ok(UnixMillis(1_736_899_200_000)));
        assert_eq!(parse_since("2025-01-15T09:00Z", now), Ok(now));
        assert_eq!(parse_since("2025-01-15 11:00:00+02:00", now), Ok(now));
        assert_eq!(
            parse_since("2025-01-15T04:30:00.5-04:30", now),
            Ok(UnixMillis(now.get() + 500))
        );
    }

    #[test]
    fn a_bad_since_names_what_is_wrong() {
        let now = UnixMillis(0);
        for (text, needle) in [
            ("yesterday", "`yesterday` is not a duration"),
            ("2025-02-30", "day 30"),
            ("2025-13-01", "month 13"),
            ("2025-01-15T09:00", "no zone"),
            ("2025-01-15T25:00Z", "hour 25"),
            ("1969-12-31", "before 1970"),
            ("5w", "date"),
        ] {
            let err = parse_since(text, now).unwrap_err();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }
}
