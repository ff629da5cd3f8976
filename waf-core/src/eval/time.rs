//! Calendar fields for the `TIME_*` variables, from the `now` the host passed in.

/// A UTC date and time.
pub(crate) struct Civil {
    pub(crate) year: i64,
    pub(crate) month: u32,
    pub(crate) day: u32,
    pub(crate) hour: u32,
    pub(crate) minute: u32,
    pub(crate) second: u32,
    /// 0 = Sunday.
    pub(crate) weekday: u32,
}

impl Civil {
    /// Converts seconds since the Unix epoch (days-to-civil after H. Hinnant).
    pub(crate) fn from_epoch(secs: u64) -> Civil {
        let days = (secs / 86_400) as i64;
        let rem = secs % 86_400;
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        let year = yoe + era * 400 + i64::from(month <= 2);
        Civil {
            year,
            month,
            day,
            hour: (rem / 3600) as u32,
            minute: (rem / 60 % 60) as u32,
            second: (rem % 60) as u32,
            weekday: ((days + 4).rem_euclid(7)) as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        let t = Civil::from_epoch(0);
        assert_eq!((t.year, t.month, t.day, t.weekday), (1970, 1, 1, 4));
        // 2026-11-30 10:41:00 UTC, a Monday.
        let t = Civil::from_epoch(1_796_035_260);
        assert_eq!(
            (t.year, t.month, t.day, t.hour, t.minute, t.weekday),
            (2026, 11, 30, 10, 41, 1)
        );
    }
}
