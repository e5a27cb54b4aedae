//! Calendar maths: proleptic Gregorian dates and RFC 3339 times, as microseconds since the Unix
//! epoch (1970-01-01T00:00:00Z), the unit of every timestamp in the format.
//!
//! This is the workspace's one implementation: `afr query` reads times with
//! [`parse_time_us`] and shows them with [`format_time_us`], and `afr eval` stamps its report
//! from [`UtcTime`]. Leap seconds are not counted (Unix time); `:60` parses as the next
//! minute's `:00`.
//!
//! # Why the day count works
//!
//! [`days_from_civil`] and [`civil_from_days`] are H. Hinnant's algorithms. Counting years
//! from March 1 puts February, and with it the leap day, at the end of the year:
//!
//! ```text
//!  month   Mar Apr May Jun Jul | Aug Sep Oct Nov Dec | Jan Feb
//!  days     31  30  31  30  31 |  31  30  31  30  31 |  31  28/29
//!           └── 153 days ──────┘  └── 153 days ──────┘
//! ```
//!
//! so the day of such a year is `(153 * month + 2) / 5 + day - 1` (months from 0 = March),
//! whatever the year, and only the length of the year depends on leap rules. Those repeat
//! every 400 years, an era of exactly 146,097 days: a date splits into an era, a year of the
//! era (`365 * y + y / 4 - y / 100` days before it) and a day of the year. 0000-03-01 is day 0
//! of era 0, and 1970-01-01 is 719,468 days later.
//!
//! ```
//! use afr_core::calendar::{days_from_civil, format_time_us, parse_time_us};
//! assert_eq!(days_from_civil(2000, 3, 1) - days_from_civil(2000, 2, 28), 2); // leap year
//! let t = parse_time_us("2026-11-30T13:34:56.789+01:00").unwrap();
//! assert_eq!(format_time_us(t), "2026-11-30T12:34:56.789Z");
//! ```

/// Days in a 400-year era of the Gregorian calendar.
const DAYS_PER_ERA: i64 = 146_097;
/// Days from 0000-03-01 (day 0 of era 0) to 1970-01-01.
const UNIX_EPOCH_DAY: i64 = 719_468;
/// Seconds in a day (Unix time has no leap seconds).
const SECS_PER_DAY: i64 = 86_400;
/// Microseconds in a second.
const US_PER_SEC: i64 = 1_000_000;

/// Days since 1970-01-01 of the proleptic Gregorian date `y`-`m`-`d` (month and day from 1).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * DAYS_PER_ERA + doe - UNIX_EPOCH_DAY
}

/// The proleptic Gregorian date `(year, month, day)` of day `z` since 1970-01-01; the inverse
/// of [`days_from_civil`].
pub fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + UNIX_EPOCH_DAY;
    let era = z.div_euclid(DAYS_PER_ERA);
    let doe = z - era * DAYS_PER_ERA;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// An instant broken down into its UTC calendar date and time of day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UtcTime {
    /// Year, e.g. 2026.
    pub year: i64,
    /// Month, 1 to 12.
    pub month: i64,
    /// Day of the month, from 1.
    pub day: i64,
    /// Hour, 0 to 23.
    pub hour: i64,
    /// Minute, 0 to 59.
    pub minute: i64,
    /// Second, 0 to 59.
    pub second: i64,
    /// Microseconds into the second, 0 to 999,999.
    pub micros: i64,
}

impl UtcTime {
    /// The date and time of `us` microseconds since the Unix epoch.
    pub fn from_unix_us(us: u64) -> UtcTime {
        // u64 microseconds are at most 1.8e13 seconds: well inside i64.
        let secs = (us / 1_000_000) as i64;
        let (year, month, day) = civil_from_days(secs.div_euclid(SECS_PER_DAY));
        let s = secs.rem_euclid(SECS_PER_DAY);
        UtcTime {
            year,
            month,
            day,
            hour: s / 3600,
            minute: (s / 60) % 60,
            second: s % 60,
            micros: (us % 1_000_000) as i64,
        }
    }
}

/// Parses `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM:SS[.ffffff](Z|±HH:MM)` into microseconds since
/// the Unix epoch; `None` for anything else or a time before 1970. Digits beyond the sixth
/// of a fraction are dropped; a day past the month's end (`02-31`) runs into the next month.
pub fn parse_time_us(s: &str) -> Option<u64> {
    let num = |a: usize, b: usize| -> Option<i64> {
        let t = s.get(a..b)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    let (y, mo, d) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    if s.get(4..5)? != "-"
        || s.get(7..8)? != "-"
        || !(1..=12).contains(&mo)
        || !(1..=31).contains(&d)
    {
        return None;
    }
    let days = days_from_civil(y, mo, d);
    if s.len() == 10 {
        return u64::try_from(days * SECS_PER_DAY * US_PER_SEC).ok();
    }
    if !matches!(s.get(10..11)?, "T" | "t" | " ") || s.get(13..14)? != ":" || s.get(16..17)? != ":"
    {
        return None;
    }
    let (h, mi, sec) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    if h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut rest = s.get(19..)?;
    let mut micros = 0i64;
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return None;
        }
        let digits = &frac[..n];
        let padded: String = digits
            .chars()
            .chain(std::iter::repeat('0'))
            .take(6)
            .collect();
        micros = padded.parse().ok()?;
        rest = &frac[n..];
    }
    let offset_s = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.get(0..1)? {
                "+" => 1,
                "-" => -1,
                _ => return None,
            };
            if rest.len() != 6 || rest.get(3..4)? != ":" {
                return None;
            }
            let oh: i64 = rest.get(1..3)?.parse().ok()?;
            let om: i64 = rest.get(4..6)?.parse().ok()?;
            sign * (oh * 3600 + om * 60)
        }
    };
    let secs = days * SECS_PER_DAY + h * 3600 + mi * 60 + sec - offset_s;
    u64::try_from(secs * US_PER_SEC + micros).ok()
}

/// Formats microseconds since the Unix epoch as RFC 3339 UTC with milliseconds,
/// e.g. `2026-11-30T12:34:56.789Z`.
pub fn format_time_us(us: u64) -> String {
    let t = UtcTime::from_unix_us(us);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year,
        t.month,
        t.day,
        t.hour,
        t.minute,
        t.second,
        t.micros / 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip() {
        let t = parse_time_us("2026-11-30T12:34:56.789Z").unwrap();
        assert_eq!(format_time_us(t), "2026-11-30T12:34:56.789Z");
        assert_eq!(parse_time_us("1970-01-01"), Some(0));
        assert_eq!(
            parse_time_us("2026-01-01T00:00:00Z"),
            Some(1_767_225_600_000_000)
        );
        assert_eq!(
            parse_time_us("2026-01-01T02:00:00+02:00"),
            Some(1_767_225_600_000_000)
        );
        assert_eq!(parse_time_us("2026-13-01"), None);
        assert_eq!(parse_time_us("2026-01-01T00:00"), None);
    }

    #[test]
    fn known_instants_break_down() {
        let at = |secs: u64| UtcTime::from_unix_us(secs * 1_000_000);
        assert_eq!((at(0).year, at(0).month, at(0).day), (1970, 1, 1));
        let leap = at(951_782_400);
        assert_eq!((leap.year, leap.month, leap.day), (2000, 2, 29));
        let t = at(1_796_041_162);
        assert_eq!(
            (t.year, t.month, t.day, t.hour, t.minute, t.second),
            (2026, 11, 30, 12, 19, 22)
        );
        assert_eq!(
            format_time_us(1_796_041_162_000_999),
            "2026-11-30T12:19:22.000Z"
        );
    }

    #[test]
    fn fractions_offsets_and_malformed_times() {
        assert_eq!(parse_time_us("1970-01-01T00:00:01.5Z"), Some(1_500_000));
        assert_eq!(
            parse_time_us("1970-01-01t00:00:01.1234567z"),
            Some(1_123_456)
        );
        assert_eq!(parse_time_us("1970-01-01 01:00:00+01:00"), Some(0));
        assert_eq!(
            parse_time_us("1970-01-01T00:00:00-00:30"),
            Some(1_800_000_000)
        );
        // Before 1970 is out of range.
        assert_eq!(parse_time_us("1970-01-01T00:00:00+00:01"), None);
        assert_eq!(parse_time_us("1969-12-31"), None);
        for bad in [
            "",
            "2026",
            "2026-1-01",
            "2026-01-00",
            "2026-01-32",
            "+026-01-01",
            "2026/01/01",
            "2026-01-01T24:00:00Z",
            "2026-01-01T00:60:00Z",
            "2026-01-01T00:00:61Z",
            "2026-01-01T00:00:00",
            "2026-01-01T00:00:00.Z",
            "2026-01-01T00:00:00+0100",
            "2026-01-01T00:00:00+01:00:00",
            "2026-01-01X00:00:00Z",
            "2026-01-01T00:00:00ZZ",
        ] {
            assert_eq!(parse_time_us(bad), None, "{bad:?}");
        }
    }

    /// Every day of four centuries (one full era plus its edges) round-trips, and consecutive
    /// days are consecutive dates.
    #[test]
    fn days_and_dates_are_inverse() {
        let first = days_from_civil(1899, 12, 31);
        assert_eq!(civil_from_days(first), (1899, 12, 31));
        let mut prev = (1899, 12, 31);
        for z in first + 1..=days_from_civil(2300, 3, 1) {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z);
            let next_day = (y, m, d) == (prev.0, prev.1, prev.2 + 1);
            let next_month = d == 1 && (y, m) == (prev.0, prev.1 + 1);
            let next_year = (m, d) == (1, 1) && y == prev.0 + 1 && prev.1 == 12;
            assert!(
                next_day || next_month || next_year,
                "{prev:?} -> {y}-{m}-{d}"
            );
            prev = (y, m, d);
        }
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        // 1900 is not a leap year, 2000 is.
        assert_eq!(
            civil_from_days(days_from_civil(1900, 2, 28) + 1),
            (1900, 3, 1)
        );
        assert_eq!(
            civil_from_days(days_from_civil(2000, 2, 28) + 1),
            (2000, 2, 29)
        );
    }
}
