//! Next-fire computation: fields, weekdays in two timezones, DST.

use super::ms;
use crate::cron::{Compiled, Schedule};
use chrono::{Datelike, TimeZone};

fn cron(expr: &str, tz: &str) -> Compiled {
    let s = Schedule::Cron {
        expr: expr.into(),
        tz: tz.into(),
    };
    Compiled::new(&s, 0).unwrap()
}

fn fires(c: &Compiled, from: &str, n: usize) -> Vec<u64> {
    let mut out = vec![];
    let mut t = ms(from);
    for _ in 0..n {
        t = c.next_after(t).unwrap();
        out.push(t);
    }
    out
}

#[test]
fn five_and_six_fields() {
    // 2026-01-02 is a Friday.
    let c = cron("0 9 * * 5", "UTC");
    assert_eq!(
        fires(&c, "2026-01-01T00:00:00Z", 2),
        [ms("2026-01-02T09:00:00Z"), ms("2026-01-09T09:00:00Z")]
    );
    let c = cron("30 0 9 * * 5", "UTC");
    assert_eq!(
        fires(&c, "2026-01-02T09:00:00Z", 1),
        [ms("2026-01-02T09:00:30Z")]
    );
    // Strictly after: a fire at `after` itself is not the next one.
    assert_eq!(
        c.next_after(ms("2026-01-02T09:00:30Z")),
        Some(ms("2026-01-09T09:00:30Z"))
    );
}

#[test]
fn weekdays_fire_on_the_right_days_in_shanghai_and_new_york() {
    for tz in ["Asia/Shanghai", "America/New_York"] {
        let zone: chrono_tz::Tz = tz.parse().unwrap();
        let c = cron("0 9 * * 1-5", tz);
        // From Friday 2026-01-09 noon UTC: Mon 12 … Fri 16, then Mon 19.
        let got = fires(&c, "2026-01-09T12:00:00Z", 6);
        let days: Vec<(u32, chrono::Weekday, u32)> = got
            .iter()
            .map(|&t| {
                let local = zone.timestamp_millis_opt(t as i64).unwrap();
                (local.day(), local.weekday(), chrono::Timelike::hour(&local))
            })
            .collect();
        use chrono::Weekday::*;
        let want_days: &[(u32, chrono::Weekday)] = if tz == "Asia/Shanghai" {
            // 12:00 UTC Friday is 20:00 in Shanghai: Friday's 09:00 there has passed.
            &[
                (12, Mon),
                (13, Tue),
                (14, Wed),
                (15, Thu),
                (16, Fri),
                (19, Mon),
            ]
        } else {
            // 07:00 in New York: Friday 9 still to come.
            &[
                (9, Fri),
                (12, Mon),
                (13, Tue),
                (14, Wed),
                (15, Thu),
                (16, Fri),
            ]
        };
        let want: Vec<_> = want_days.iter().map(|&(d, w)| (d, w, 9)).collect();
        assert_eq!(days, want, "{tz}");
    }
}

#[test]
fn spring_forward_shifts_a_missing_wall_time_to_the_first_valid_instant() {
    // 2026-03-08: New York clocks jump 02:00 EST → 03:00 EDT; 02:30 does not exist.
    let c = cron("30 2 * * *", "America/New_York");
    let got = fires(&c, "2026-03-07T12:00:00Z", 3);
    assert_eq!(
        got,
        [
            ms("2026-03-08T03:00:00-04:00"),
            ms("2026-03-09T02:30:00-04:00"),
            ms("2026-03-10T02:30:00-04:00"),
        ]
    );
    // Every wall time inside the gap maps to the same instant: it fires once.
    let c = cron("0,15,30,45 2 * * *", "America/New_York");
    let got = fires(&c, "2026-03-08T00:00:00-05:00", 2);
    assert_eq!(
        got,
        [
            ms("2026-03-08T03:00:00-04:00"),
            ms("2026-03-09T02:00:00-04:00")
        ]
    );
}

#[test]
fn fall_back_fires_a_repeated_wall_time_once_at_its_first_occurrence() {
    // 2026-11-01: New York clocks go 02:00 EDT → 01:00 EST; 01:30 happens twice.
    let c = cron("30 1 * * *", "America/New_York");
    let got = fires(&c, "2026-10-31T12:00:00Z", 3);
    assert_eq!(
        got,
        [
            ms("2026-10-31T01:30:00-04:00") + 86_400_000,
            ms("2026-11-02T01:30:00-05:00"),
            ms("2026-11-03T01:30:00-05:00"),
        ]
    );
    assert_eq!(got[0], ms("2026-11-01T01:30:00-04:00"));
    // Asked from inside the repeated hour (01:10 EST), the next is the next day's.
    assert_eq!(
        c.next_after(ms("2026-11-01T01:10:00-05:00")),
        Some(ms("2026-11-02T01:30:00-05:00"))
    );
    // The spring-forward job of the issue fires once on the fall-back day too.
    let c = cron("30 2 * * *", "America/New_York");
    let day: Vec<u64> = fires(&c, "2026-11-01T00:00:00-04:00", 2);
    assert_eq!(
        day,
        [
            ms("2026-11-01T02:30:00-05:00"),
            ms("2026-11-02T02:30:00-05:00")
        ]
    );
}

#[test]
fn every_counts_from_its_anchor() {
    let s = Schedule::Every {
        every_ms: 1000,
        anchor_ms: Some(500),
    };
    let c = Compiled::new(&s, 0).unwrap();
    assert_eq!(c.next_after(0), Some(500));
    assert_eq!(c.next_after(500), Some(1500));
    assert_eq!(c.next_after(1499), Some(1500));
    assert_eq!(c.fires_between(500, 4500, 2), (vec![3500, 4500], 4));
}

#[test]
fn schedules_print_as_people_write_them() {
    use crate::cron::human_ms;
    assert_eq!(human_ms(600_000), "10m");
    assert_eq!(human_ms(5_400_000), "1h30m");
    assert_eq!(human_ms(86_400_000), "1d");
    assert_eq!(human_ms(1_500), "1s500ms");
    assert_eq!(human_ms(0), "0ms");
    for ms in [600_000, 5_400_000, 1_500, 90_061_001] {
        let back = clawbus_core::config::parse_duration(&human_ms(ms)).unwrap();
        assert_eq!(back.as_millis(), u128::from(ms), "{}", human_ms(ms));
    }
    let every = Schedule::Every {
        every_ms: 600_000,
        anchor_ms: None,
    };
    assert_eq!(every.to_string(), "every 10m");
    let c = Schedule::Cron {
        expr: "0 9 * * 1-5".into(),
        tz: "Europe/Paris".into(),
    };
    assert_eq!(c.to_string(), "cron \"0 9 * * 1-5\" Europe/Paris");
}

#[test]
fn the_shortest_gap_of_a_schedule() {
    let from = ms("2026-01-05T08:00:00Z");
    assert_eq!(
        cron("*/30 * * * * *", "UTC").shortest_gap_ms(from, 100),
        Some(30_000)
    );
    assert_eq!(
        cron("0 9 * * 1-5", "UTC").shortest_gap_ms(from, 100),
        Some(86_400_000)
    );
    assert_eq!(
        cron("0,1 9 * * *", "UTC").shortest_gap_ms(from, 100),
        Some(60_000)
    );
    let every = Compiled::Every {
        every_ms: 1_000,
        anchor_ms: 0,
    };
    assert_eq!(every.shortest_gap_ms(from, 100), Some(1_000));
    assert_eq!(
        Compiled::At { at_ms: from + 1 }.shortest_gap_ms(from, 100),
        None
    );
}

#[test]
fn an_unknown_job_is_named_by_its_id() {
    let id = crate::cron::JobId::parse("nosuch").unwrap();
    let e = crate::cron::StoreError::UnknownJob(id);
    assert_eq!(e.to_string(), "unknown cron job \"nosuch\"");
}
