//! Wall-clock times as dates on the UTC calendar, for names and pages a person reads (the
//! measurements themselves use monotonic clocks).

/// A moment on the UTC calendar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UtcDate {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
}

impl UtcDate {
    /// The date of `unix_s` seconds after 1970-01-01 00:00 UTC (the proleptic Gregorian
    /// calendar: days counted in 400-year eras of 146,097 days, years starting in March so
    /// that the leap day comes last).
    pub fn from_unix(unix_s: u64) -> UtcDate {
        let (days, secs) = ((unix_s / 86_400) as i64, unix_s % 86_400);
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        let year = yoe + era * 400 + i64::from(month <= 2);
        UtcDate { year, month, day, hour: (secs / 3600) as u32, minute: (secs % 3600 / 60) as u32, second: (secs % 60) as u32 }
    }

    /// `2026-12-02 03:14 UTC`.
    pub fn minutes(&self) -> String {
        format!("{:04}-{:02}-{:02} {:02}:{:02} UTC", self.year, self.month, self.day, self.hour, self.minute)
    }
}

/// Milliseconds since 1970-01-01 00:00 UTC now (0 if the clock is set before it).
pub fn now_unix_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_on_the_calendar() {
        assert_eq!(UtcDate::from_unix(0).minutes(), "1970-01-01 00:00 UTC");
        assert_eq!(UtcDate::from_unix(1_796_181_240).minutes(), "2026-12-02 03:14 UTC");
        assert_eq!(UtcDate::from_unix(951_782_400).minutes(), "2000-02-29 00:00 UTC");
        assert_eq!(UtcDate::from_unix(951_868_799), UtcDate { year: 2000, month: 2, day: 29, hour: 23, minute: 59, second: 59 });
        assert_eq!(UtcDate::from_unix(4_107_542_400).minutes(), "2100-03-01 00:00 UTC");
    }
}
