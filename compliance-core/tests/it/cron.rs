//! Five-field cron validation and next-fire computation for scan schedules.

use chrono::{DateTime, TimeZone, Utc};
use compliance_core::*;

fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
}

#[test]
fn next_fire_times() {
    let now = at(2026, 11, 21, 10, 37); // a Saturday
    let cases = [
        ("* * * * *", at(2026, 11, 21, 10, 38)),
        ("*/15 * * * *", at(2026, 11, 21, 10, 45)),
        ("0 * * * *", at(2026, 11, 21, 11, 0)),
        ("30 2 * * *", at(2026, 11, 22, 2, 30)),
        ("0 9 * * MON-FRI", at(2026, 11, 23, 9, 0)),
        ("0 0 1 * *", at(2026, 12, 1, 0, 0)),
        ("0 0 1 jan *", at(2027, 1, 1, 0, 0)),
        ("0 0 29 2 *", at(2028, 2, 29, 0, 0)),
        ("0 0 * * 7", at(2026, 11, 22, 0, 0)),
        ("0 0 * * 0", at(2026, 11, 22, 0, 0)),
        // Both day fields restricted: either matches (the 1st, or a Monday).
        ("0 0 1 * 1", at(2026, 11, 23, 0, 0)),
        ("5,10-12 8/6 * * *", at(2026, 11, 21, 14, 5)),
        ("37 10 * * *", at(2026, 11, 22, 10, 37)),
    ];
    for (expr, expected) in cases {
        let schedule = CronSchedule::parse(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
        assert_eq!(schedule.next_after(now), Some(expected), "{expr}");
        assert!(schedule.matches(expected), "{expr}");
    }
    let with_seconds = Utc.with_ymd_and_hms(2026, 11, 21, 10, 44, 59).unwrap();
    assert_eq!(
        CronSchedule::parse("*/15 * * * *")
            .unwrap()
            .next_after(with_seconds),
        Some(at(2026, 11, 21, 10, 45))
    );
}

#[test]
fn a_schedule_that_could_never_fire_is_refused_and_a_leap_day_is_not() {
    for never in [
        "0 0 30 2 *",
        "0 0 31 4 *",
        "0 0 31 2,4,6,9,11 *",
        "0 0 30,31 FEB *",
    ] {
        let err = CronSchedule::parse(never).unwrap_err();
        assert_eq!(err.field, Some(CronField::DayOfMonth), "{never}: {err}");
    }
    // February 29 comes in leap years: within the search horizon.
    assert_eq!(
        CronSchedule::parse("0 0 29 2 *")
            .unwrap()
            .next_after(at(2026, 1, 1, 0, 0)),
        Some(at(2028, 2, 29, 0, 0))
    );
    // A restricted weekday fires whatever the days of the month say.
    assert!(CronSchedule::parse("0 0 31 2 MON")
        .unwrap()
        .next_after(at(2026, 1, 1, 0, 0))
        .is_some());
}

#[test]
fn bad_expressions_say_which_field_is_wrong() {
    let cases = [
        ("* * * *", None),
        ("0 0 * * * *", None),
        ("", None),
        ("60 * * * *", Some(CronField::Minute)),
        ("* 24 * * *", Some(CronField::Hour)),
        ("* * 0 * *", Some(CronField::DayOfMonth)),
        ("* * 32 * *", Some(CronField::DayOfMonth)),
        ("* * * 13 *", Some(CronField::Month)),
        ("* * * FOO *", Some(CronField::Month)),
        ("* * * * 8", Some(CronField::DayOfWeek)),
        ("*/0 * * * *", Some(CronField::Minute)),
        ("5-1 * * * *", Some(CronField::Minute)),
        ("1,,2 * * * *", Some(CronField::Minute)),
        ("a * * * *", Some(CronField::Minute)),
        ("* * * * MON-", Some(CronField::DayOfWeek)),
    ];
    for (expr, field) in cases {
        let err = CronSchedule::parse(expr).unwrap_err();
        assert_eq!(err.field, field, "{expr}: {err}");
        if let Some(field) = field {
            assert!(err.to_string().contains(field.name()), "{err}");
        }
        let as_crate_error: Error = err.into();
        assert!(as_crate_error
            .to_string()
            .starts_with("invalid cron expression"));
    }
}
