//! Times on the wire: agentd keeps milliseconds since the Unix epoch (`*_ms` fields), and the
//! views also give the reference documents' RFC 3339 strings (seed 001's `lastUpdate`), always
//! in UTC with milliseconds, e.g. `2023-11-14T22:13:20.123Z`.

/// `ms` (since the Unix epoch) as an RFC 3339 UTC timestamp with milliseconds.
pub fn rfc3339_utc(ms: u64) -> String {
    let secs = ms / 1000;
    let days = secs / 86_400;
    let in_day = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        in_day / 3600,
        in_day % 3600 / 60,
        in_day % 60,
        ms % 1000
    )
}

/// The proleptic Gregorian date `days` after 1970-01-01 (Howard Hinnant's `civil_from_days`,
/// for days on or after the epoch).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    // Counted from 0000-03-01, so that the leap day ends a year.
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants_format_as_rfc3339_utc() {
        for (ms, text) in [
            (0, "1970-01-01T00:00:00.000Z"),
            (951_782_400_000, "2000-02-29T00:00:00.000Z"),
            (1_700_000_000_123, "2023-11-14T22:13:20.123Z"),
            (1_709_251_199_999, "2024-02-29T23:59:59.999Z"),
            (4_102_444_799_999, "2099-12-31T23:59:59.999Z"),
        ] {
            assert_eq!(rfc3339_utc(ms), text, "{ms}");
        }
    }

    #[test]
    fn every_day_follows_the_one_before() {
        let leap =
            |y: u64| y.is_multiple_of(4) && (!y.is_multiple_of(100) || y.is_multiple_of(400));
        let days_in = |y: u64, m: u64| match m {
            2 if leap(y) => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        };
        // Across eight centuries (leap years and their exceptions), no day is skipped or
        // repeated.
        let mut last = civil_from_days(0);
        assert_eq!(last, (1970, 1, 1));
        for days in 1..146_097 * 2 {
            let next = civil_from_days(days);
            let (y, m, d) = last;
            let expected = match (d == days_in(y, m), m) {
                (false, _) => (y, m, d + 1),
                (true, 12) => (y + 1, 1, 1),
                (true, _) => (y, m + 1, 1),
            };
            assert_eq!(next, expected, "day {days}");
            last = next;
        }
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(
            civil_from_days(47_541),
            (2100, 3, 1),
            "2100 is not a leap year"
        );
    }
}
