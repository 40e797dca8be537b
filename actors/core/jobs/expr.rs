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
    pub fn parse(expr: &str) -> Result<Self, CronExprError> {
        let fields: Vec<&str> = expr.split_whitespace().collect();
        let mut six: Vec<String> = match fields.len() {
            5 => std::iter::once("0")
                .chain(fields.iter().copied())
                .map(str::to_string)
                .collect(),
            6 => fields.iter().map(|f| f.to_string()).collect(),
            n => return Err(CronExprError::FieldCount(n)),
        };
        for (text, field) in six.iter().zip(&FIELDS) {
            field.check(text).map_err(CronExprError::Field)?;
        }
        if let Some(dow) = six.get_mut(5) {
            *dow = day_of_week(dow).map_err(CronExprError::Field)?;
        }
        let schedule = cron::Schedule::from_str(&six.join(" "))
            .map_err(|e| CronExprError::Crate(e.to_string()))?;
        Ok(Self { schedule })
    }

    /// The crate's schedule (6 fields, crate day numbering).
    pub fn schedule(&self) -> &cron::Schedule {
        &self.schedule
    }
}

/// A cron expression that does not parse; the message says what is wrong, for people.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CronExprError {
    /// Neither 5 nor 6 fields.
    #[error(
        "expected 5 fields (minute hour day-of-month month day-of-week) or 6 (seconds first), got {0}"
    )]
    FieldCount(usize),
    /// A field holds a value out of range, a bad step or a backwards range (the message names
    /// the field: `minute 61 is out of range 0-59`).
    #[error("{0}")]
    Field(String),
    /// The `cron` crate refuses the normalised expression: its message (the crate's error is a
    /// message with neither a source nor `Clone`, and a job spec's error is compared in tests).
    #[error("{0}")]
    Crate(String),
}

/// One field of a 6-field expression, as people name it, with its allowed values.
struct Field {
    name: &'static str,
    lo: u32,
    hi: u32,
    /// Names accepted besides numbers (`JAN`…), numbered from `lo`.
    names: &'static [&'static str],
    /// What a value may be, for the error.
    expected: &'static str,
}

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];

/// The fields of the 6-field form, seconds first.
const FIELDS: [Field; 6] = [
    Field::numbers("second", 0, 59, "0-59"),
    Field::numbers("minute", 0, 59, "0-59"),
    Field::numbers("hour", 0, 23, "0-23"),
    Field::numbers("day-of-month", 1, 31, "1-31"),
    Field {
        name: "month",
        lo: 1,
        hi: 12,
        names: &MONTHS,
        expected: "1-12 or JAN-DEC",
    },
    Field {
        name: "day-of-week",
        lo: 0,
        hi: 7,
        names: &DAY_NAMES,
        expected: "0-7 or SUN-SAT, 0 and 7 are Sunday",
    },
];

impl Field {
    const fn numbers(name: &'static str, lo: u32, hi: u32, expected: &'static str) -> Self {
        Self {
            name,
            lo,
            hi,
            names: &[],
            expected,
        }
    }

    /// Checks every item of a field (`*`, `?`, `a`, `a-b`, each with an optional `/step`,
    /// comma-separated); the error names the field and its range (`minute 61 is out of range
    /// 0-59`).
    fn check(&self, text: &str) -> Result<(), String> {
        for item in text.split(',') {
            let (range, step) = match item.split_once('/') {
                Some((r, s)) => (r, Some(s)),
                None => (item, None),
            };
            if let Some(step) = step {
                if !step.parse::<u32>().is_ok_and(|n| n > 0) {
                    return Err(format!(
                        "{} step {step:?} is not a positive number",
                        self.name
                    ));
                }
            }
            if range == "*" || range == "?" {
                continue;
            }
            match range.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (self.value(a)?, self.value(b)?);
                    // `5-0` in day-of-week is Friday to Sunday.
                    let wraps_to_sunday = self.name == "day-of-week" && b == 0;
                    if a > b && !wraps_to_sunday {
                        return Err(format!("{} range {range:?} runs backwards", self.name));
                    }
                }
                None => {
                    self.value(range)?;
                }
            }
        }
        Ok(())
    }

    /// One value: a number in range or a name.
    fn value(&self, text: &str) -> Result<u32, String> {
        if let Ok(n) = text.parse::<u32>() {
            return if (self.lo..=self.hi).contains(&n) {
                Ok(n)
            } else {
                Err(format!(
                    "{} {n} is out of range {}",
                    self.name, self.expected
                ))
            };
        }
        let named = self.names.iter().position(|n| n.eq_ignore_ascii_case(text));
        match named.and_then(|i| u32::try_from(i).ok()) {
            Some(i) => Ok(self.lo + i),
            None if text.is_empty() => Err(format!(
                "{} has an empty value (expected {})",
                self.name, self.expected
            )),
            None => Err(format!(
                "{} {text:?} is not a value (expected {})",
                self.name, self.expected
            )),
        }
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

    fn error(expr: &str) -> String {
        CronExpr::parse(expr)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn a_bad_field_is_named_with_its_range() {
        assert_eq!(error("61 * * * *"), "minute 61 is out of range 0-59");
        assert_eq!(error("0 24 * * *"), "hour 24 is out of range 0-23");
        assert_eq!(error("0 9 0 * *"), "day-of-month 0 is out of range 1-31");
        assert_eq!(
            error("0 9 * 13 *"),
            "month 13 is out of range 1-12 or JAN-DEC"
        );
        assert_eq!(
            error("0 9 * * 8"),
            "day-of-week 8 is out of range 0-7 or SUN-SAT, 0 and 7 are Sunday"
        );
        assert_eq!(error("60 0 9 * * *"), "second 60 is out of range 0-59");
        assert_eq!(error("0 5-2 * * *"), "hour range \"5-2\" runs backwards");
        assert_eq!(
            error("*/0 * * * *"),
            "minute step \"0\" is not a positive number"
        );
        assert_eq!(
            error("x * * * *"),
            "minute \"x\" is not a value (expected 0-59)"
        );
        assert!(CronExpr::parse("0 9 * jan-mar mon-fri").is_ok());
        assert!(CronExpr::parse("0,30 8-18/2 1,15 * 5-0").is_ok());
    }

    #[test]
    fn five_and_six_fields_parse_others_do_not() {
        assert!(CronExpr::parse("0 9 * * 5").is_ok());
        assert!(CronExpr::parse("30 0 9 * * 5").is_ok());
        let err = CronExpr::parse("0 9 * *")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("got 4"), "{err}");
        assert!(CronExpr::parse("61 9 * * *").is_err());
    }
}
