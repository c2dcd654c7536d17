//! UTC calendar arithmetic for quotas by day and by month and for timestamps in headers:
//! days since the Unix epoch to dates and back, with no time-zone database.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Days since 1970-01-01 → (year, month, day) (Howard Hinnant's algorithm).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// (year, month) → days since 1970-01-01 of that month's first day.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from(if m > 2 { m - 3 } else { m + 9 });
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The UTC day `t` falls in, as days since the epoch, and the time left until the next.
pub fn day_of(t: SystemTime) -> (i64, Duration) {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let day = (secs / 86_400) as i64;
    (day, Duration::from_secs(86_400 - secs % 86_400))
}

/// The UTC month `t` falls in, as (year, month), and the time left until the next.
pub fn month_of(t: SystemTime) -> ((i64, u32), Duration) {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (y, m, _) = civil_from_days((secs / 86_400) as i64);
    let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    let next = u64::try_from(days_from_civil(ny, nm, 1)).unwrap_or(0) * 86_400;
    ((y, m), Duration::from_secs(next.saturating_sub(secs)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_both_ways() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_787), (2026, 11, 30));
        assert_eq!(days_from_civil(2026, 11, 30), 20_787);
        assert_eq!(
            days_from_civil(2024, 3, 1) - days_from_civil(2024, 2, 1),
            29
        );
        for d in [-800_000, -1, 0, 59, 60, 11_016, 20_787, 500_000] {
            let (y, m, dd) = civil_from_days(d);
            assert_eq!(days_from_civil(y, m, dd), d);
        }
    }

    #[test]
    fn days_and_months_end_when_they_should() {
        // 2026-11-30T23:00:00Z: an hour left in the day and in the month.
        let t = UNIX_EPOCH + Duration::from_secs(20_787 * 86_400 + 23 * 3_600);
        assert_eq!(day_of(t), (20_787, Duration::from_secs(3_600)));
        assert_eq!(month_of(t), ((2026, 11), Duration::from_secs(3_600)));
        let dec = UNIX_EPOCH + Duration::from_secs(days_from_civil(2026, 12, 31) as u64 * 86_400);
        assert_eq!(month_of(dec), ((2026, 12), Duration::from_secs(86_400)));
    }
}
