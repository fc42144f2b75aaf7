//! Five-field cron expressions for scan schedules (minute hour dayOfMonth month
//! dayOfWeek), and the next time one fires after a given instant. Pure: the caller
//! passes `now`.
//!
//! Each field takes `*`, a value, a range `a-b`, a step `*/n`, `a-b/n` or `a/n`,
//! and comma-separated lists of these. Months accept `JAN`-`DEC` and days of week
//! `SUN`-`SAT` (any case); day of week 7 is Sunday, like 0. As in Vixie cron, when
//! both dayOfMonth and dayOfWeek are restricted (neither starts with `*`), a day
//! matches if either matches.

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveTime, TimeZone, Timelike, Utc};

/// The five fields, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CronField {
    /// 0-59.
    Minute,
    /// 0-23.
    Hour,
    /// 1-31.
    DayOfMonth,
    /// 1-12 or JAN-DEC.
    Month,
    /// 0-7 (0 and 7 are Sunday) or SUN-SAT.
    DayOfWeek,
}

impl CronField {
    const ALL: [CronField; 5] = [
        CronField::Minute,
        CronField::Hour,
        CronField::DayOfMonth,
        CronField::Month,
        CronField::DayOfWeek,
    ];

    /// The field's name as the documents spell it.
    pub fn name(self) -> &'static str {
        match self {
            CronField::Minute => "minute",
            CronField::Hour => "hour",
            CronField::DayOfMonth => "dayOfMonth",
            CronField::Month => "month",
            CronField::DayOfWeek => "dayOfWeek",
        }
    }

    fn range(self) -> (u32, u32) {
        match self {
            CronField::Minute => (0, 59),
            CronField::Hour => (0, 23),
            CronField::DayOfMonth => (1, 31),
            CronField::Month => (1, 12),
            CronField::DayOfWeek => (0, 7),
        }
    }

    fn names(self) -> &'static [&'static str] {
        match self {
            CronField::Month => &[
                "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
            ],
            CronField::DayOfWeek => &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"],
            _ => &[],
        }
    }
}

/// Why a cron expression was refused; names the field at fault when there is one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid cron expression: {}{message}", field.map(|f| format!("{}: ", f.name())).unwrap_or_default())]
pub struct CronError {
    /// The field at fault, if the problem is in one field.
    pub field: Option<CronField>,
    /// What is wrong.
    pub message: String,
}

/// A parsed five-field cron expression.
///
/// ```
/// use compliance_core::CronSchedule;
/// use chrono::{TimeZone, Utc};
///
/// let every_15 = CronSchedule::parse("*/15 * * * *").unwrap();
/// let now = Utc.with_ymd_and_hms(2026, 3, 1, 10, 7, 30).unwrap();
/// assert_eq!(every_15.next_after(now), Some(Utc.with_ymd_and_hms(2026, 3, 1, 10, 15, 0).unwrap()));
///
/// let err = CronSchedule::parse("0 0 * * * *").unwrap_err();
/// assert!(err.to_string().contains("5 fields"));
/// let err = CronSchedule::parse("0 25 * * *").unwrap_err();
/// assert!(err.to_string().contains("hour"));
///
/// // Days that never fall in the months named: refused, never saved to sleep.
/// for never in ["0 0 30 2 *", "0 0 31 4 *", "0 0 31 2,4,6,9,11 *"] {
///     let err = CronSchedule::parse(never).unwrap_err();
///     assert!(err.to_string().contains("dayOfMonth"), "{err}");
/// }
/// // Leap days and a weekday alternative are possible.
/// assert!(CronSchedule::parse("0 0 29 2 *").is_ok());
/// assert!(CronSchedule::parse("0 0 30 2 1").is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronSchedule {
    minutes: u64,
    hours: u64,
    days_of_month: u64,
    months: u64,
    days_of_week: u64,
    day_of_month_restricted: bool,
    day_of_week_restricted: bool,
}

/// The most days month `m` (1 to 12) ever has (February: 29, in leap years).
fn longest_month(m: u32) -> u32 {
    match m {
        2 => 29,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// How far ahead `next_after` looks before concluding a schedule never fires
/// (for example `0 0 30 2 *`).
const SEARCH_YEARS: i32 = 8;

impl CronSchedule {
    /// Parses an expression of exactly five whitespace-separated fields.
    pub fn parse(expression: &str) -> Result<Self, CronError> {
        let fields: Vec<&str> = expression.split_whitespace().collect();
        let [minute, hour, dom, month, dow] = fields.as_slice() else {
            return Err(CronError {
                field: None,
                message: format!(
                    "expected 5 fields (minute hour dayOfMonth month dayOfWeek), found {}",
                    fields.len()
                ),
            });
        };
        let texts = [*minute, *hour, *dom, *month, *dow];
        let mut sets = [0u64; 5];
        for ((field, text), set) in CronField::ALL.into_iter().zip(texts).zip(sets.iter_mut()) {
            *set = parse_field(field, text).map_err(|message| CronError {
                field: Some(field),
                message,
            })?;
        }
        let [minutes, hours, days_of_month, months, mut days_of_week] = sets;
        // Sunday is both 0 and 7.
        if days_of_week & (1 << 7) != 0 {
            days_of_week = (days_of_week & !(1 << 7)) | 1;
        }
        let day_of_month_restricted = !dom.starts_with('*');
        let day_of_week_restricted = !dow.starts_with('*');
        // With the day of the week unrestricted, the days of the month alone decide:
        // a schedule whose days never fall in its months (`0 0 30 2 *`, `0 0 31 4 *`)
        // would be saved and never run. (Restricted too, the weekdays always fire.)
        if day_of_month_restricted && !day_of_week_restricted {
            let possible = (1..=12u32)
                .filter(|m| bit(months, *m))
                .any(|m| (1..=longest_month(m)).any(|d| bit(days_of_month, d)));
            if !possible {
                return Err(CronError {
                    field: Some(CronField::DayOfMonth),
                    message: format!(
                        "`{dom}` never falls in the months `{month}` names, so the schedule would never run"
                    ),
                });
            }
        }
        Ok(CronSchedule {
            minutes,
            hours,
            days_of_month,
            months,
            days_of_week,
            day_of_month_restricted,
            day_of_week_restricted,
        })
    }

    /// Whether the schedule fires in the minute containing `at`.
    pub fn matches(&self, at: DateTime<Utc>) -> bool {
        bit(self.months, at.month())
            && self.day_matches(at.date_naive())
            && bit(self.hours, at.hour())
            && bit(self.minutes, at.minute())
    }

    /// The first minute strictly after `now` at which the schedule fires, or `None`
    /// if it never fires in the next eight years.
    pub fn next_after(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let start = now
            .with_second(0)?
            .with_nanosecond(0)?
            .checked_add_signed(Duration::minutes(1))?;
        let horizon = start.year().checked_add(SEARCH_YEARS)?;
        let mut date = start.date_naive();
        let mut first_day = true;
        while date.year() <= horizon {
            if !bit(self.months, date.month()) {
                date = first_of_next_month(date)?;
                first_day = false;
                continue;
            }
            if self.day_matches(date) {
                let (from_hour, from_minute) = if first_day {
                    (start.hour(), start.minute())
                } else {
                    (0, 0)
                };
                if let Some((h, m)) = self.first_time_from(from_hour, from_minute) {
                    let time = NaiveTime::from_hms_opt(h, m, 0)?;
                    return Some(Utc.from_utc_datetime(&date.and_time(time)));
                }
            }
            date = date.succ_opt()?;
            first_day = false;
        }
        None
    }

    fn day_matches(&self, date: NaiveDate) -> bool {
        let dom = bit(self.days_of_month, date.day());
        let dow = bit(self.days_of_week, date.weekday().num_days_from_sunday());
        if self.day_of_month_restricted && self.day_of_week_restricted {
            dom || dow
        } else {
            dom && dow
        }
    }

    fn first_time_from(&self, hour: u32, minute: u32) -> Option<(u32, u32)> {
        (hour..24).filter(|&h| bit(self.hours, h)).find_map(|h| {
            let from = if h == hour { minute } else { 0 };
            (from..60).find(|&m| bit(self.minutes, m)).map(|m| (h, m))
        })
    }
}

impl std::str::FromStr for CronSchedule {
    type Err = CronError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CronSchedule::parse(s)
    }
}

fn bit(set: u64, n: u32) -> bool {
    n < 64 && set & (1u64 << n) != 0
}

fn first_of_next_month(date: NaiveDate) -> Option<NaiveDate> {
    let (year, month) = if date.month() == 12 {
        (date.year().checked_add(1)?, 1)
    } else {
        (date.year(), date.month() + 1)
    };
    NaiveDate::from_ymd_opt(year, month, 1)
}

fn parse_field(field: CronField, text: &str) -> Result<u64, String> {
    let (min, max) = field.range();
    let mut set = 0u64;
    for item in text.split(',') {
        if item.is_empty() {
            return Err(format!("`{text}` has an empty list item"));
        }
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => {
                let step: u32 = step
                    .parse()
                    .map_err(|_| format!("step `{step}` is not a positive number"))?;
                if step == 0 {
                    return Err("a step cannot be 0".to_owned());
                }
                (range, Some(step))
            }
            None => (item, None),
        };
        let (low, high) = if range == "*" {
            (min, max)
        } else if let Some((a, b)) = range.split_once('-') {
            let (a, b) = (value(field, a)?, value(field, b)?);
            if a > b {
                return Err(format!("range `{range}` runs backwards"));
            }
            (a, b)
        } else {
            let a = value(field, range)?;
            // `a/n` means from a to the end of the range, every n.
            (a, if step.is_some() { max } else { a })
        };
        let step = step.unwrap_or(1);
        let mut n = low;
        while n <= high {
            set |= 1u64 << n;
            n = match n.checked_add(step) {
                Some(next) => next,
                None => break,
            };
        }
    }
    Ok(set)
}

fn value(field: CronField, text: &str) -> Result<u32, String> {
    let (min, max) = field.range();
    let upper = text.to_ascii_uppercase();
    if let Some(pos) = field.names().iter().position(|name| *name == upper) {
        let base = if field == CronField::Month { 1 } else { 0 };
        return u32::try_from(pos)
            .map(|p| p + base)
            .map_err(|_| format!("`{text}` is not a valid value"));
    }
    let n: u32 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number"))?;
    if n < min || n > max {
        return Err(format!("`{text}` is out of range {min}-{max}"));
    }
    Ok(n)
}
