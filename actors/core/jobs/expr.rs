//! Cron expressions: standard 5-field (`min hour dom month dow`) and 6-field (seconds first)
//! text, normalised into what the `cron` crate parses.
//!
//! Two differences from the crate are corrected here:
//! - the crate wants 6 or 7 fields: a 5-field expression gets `0` seconds in front;
//! - the crate numbers days of the week 1–7 from Sunday, standard cron 0–7 from Sunday (0 and 7
//!   both Sunday, 1 Monday): numeric day-of-week fields are rewritten into day names, so
//!   `0 9 * * 1-5` means Monday to Friday as everywhere else.
//!
//! Like the crate (and unlike Vixie cron), a job whose day-of-month and day-of-week are both
//! restricted fires when both match.

use std::str::FromStr;

/// Day names in the crate's order, Sunday first.
const DAY_NAMES: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// A parsed cron expression.
#[derive(Debug, Clone)]
pub struct CronExpr {
    schedule: cron::Schedule,
}

impl CronExpr {
    /// Parses a 5- or 6-field expression; the error says what is wrong, for people.
    pub fn parse(expr: &str) -> Result<Self, String> {
        let fields: Vec<&str> = expr.split_whitespace().collect();
        let mut six: Vec<String> = match fields.len() {
            5 => std::iter::once("0")
                .chain(fields.iter().copied())
                .map(str::to_string)
                .collect(),
            6 => fields.iter().map(|f| f.to_string()).collect(),
            n => {
                return Err(format!(
                    "expected 5 fields (minute hour day-of-month month day-of-week) or 6 (seconds first), got {n}"
                ));
            }
        };
        if let Some(dow) = six.get_mut(5) {
            *dow = day_of_week(dow)?;
        }
        let schedule = cron::Schedule::from_str(&six.join(" ")).map_err(|e| e.to_string())?;
        Ok(Self { schedule })
    }

    /// The crate's schedule (6 fields, crate day numbering).
    pub fn schedule(&self) -> &cron::Schedule {
        &self.schedule
    }
}

/// Rewrites a standard day-of-week field into crate day names (`1-5` → `MON,TUE,WED,THU,FRI`).
fn day_of_week(field: &str) -> Result<String, String> {
    if field == "*" || field == "?" {
        return Ok(field.to_string());
    }
    let mut days = [false; 7];
    for item in field.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => {
                let step: usize =
                    s.parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                        format!("day-of-week step {s:?} is not a positive number")
                    })?;
                (r, step)
            }
            None => (item, 1),
        };
        let (lo, hi) = match range {
            "*" | "?" => (0, 6),
            r => match r.split_once('-') {
                Some((a, b)) => (day(a)?, day(b)?),
                None if step > 1 => (day(r)?, 6),
                None => (day(r)?, day(r)?),
            },
        };
        // `5-7` is Friday to Sunday: 7 is Sunday at the end of the week.
        let hi = if hi == 0 && lo > 0 { 7 } else { hi };
        if lo > hi {
            return Err(format!("day-of-week range {range:?} runs backwards"));
        }
        for d in (lo..=hi).step_by(step) {
            if let Some(slot) = days.get_mut(d % 7) {
                *slot = true;
            }
        }
    }
    let names: Vec<&str> = DAY_NAMES
        .iter()
        .zip(days)
        .filter(|(_, on)| *on)
        .map(|(n, _)| *n)
        .collect();
    Ok(names.join(","))
}

/// One day of the week: 0–7 (0 and 7 Sunday) or a three-letter English name.
fn day(s: &str) -> Result<usize, String> {
    if let Ok(n) = s.parse::<usize>() {
        return if n <= 7 {
            Ok(n)
        } else {
            Err(format!(
                "day of week {n} is out of range (0-7, 0 and 7 are Sunday)"
            ))
        };
    }
    DAY_NAMES
        .iter()
        .position(|n| n.eq_ignore_ascii_case(s))
        .ok_or_else(|| format!("{s:?} is not a day of the week (0-7 or SUN..SAT)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_days_become_names() {
        assert_eq!(
            day_of_week("1-5").ok().as_deref(),
            Some("MON,TUE,WED,THU,FRI")
        );
        assert_eq!(day_of_week("0").ok().as_deref(), Some("SUN"));
        assert_eq!(day_of_week("7").ok().as_deref(), Some("SUN"));
        assert_eq!(day_of_week("5-7").ok().as_deref(), Some("SUN,FRI,SAT"));
        assert_eq!(day_of_week("*/2").ok().as_deref(), Some("SUN,TUE,THU,SAT"));
        assert_eq!(day_of_week("mon,Fri").ok().as_deref(), Some("MON,FRI"));
        assert!(day_of_week("8").is_err());
        assert!(day_of_week("5-1").is_err());
    }

    #[test]
    fn five_and_six_fields_parse_others_do_not() {
        assert!(CronExpr::parse("0 9 * * 5").is_ok());
        assert!(CronExpr::parse("30 0 9 * * 5").is_ok());
        let err = CronExpr::parse("0 9 * *").err().unwrap_or_default();
        assert!(err.contains("got 4"), "{err}");
        assert!(CronExpr::parse("61 9 * * *").is_err());
    }
}
